#!/bin/sh
# Session 31, second call: the D = 128 forward's partial last wave (bench/attention_waves.py).
#   TILES_COMMIT=<commit> sh bench/device_session31b.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
timeout 300 python3 bench/attention_waves.py 2>&1 | tr -d '\000' | grep -v Warning
