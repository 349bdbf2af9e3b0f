#!/bin/sh
# Session 31, third call: the D = 128 forward's last wave split along the keys (bench/attention_tail_split.py).
#   TILES_COMMIT=<commit> sh bench/device_session31c.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
timeout 400 python3 bench/attention_tail_split.py 2>&1 | tr -d '\000' | grep -v Warning
