#!/bin/sh
# Session 36, third call: the D = 128 forward's O store at short sequences. Store widths and the
# once-a-tile bound test (bench/attention_ostore.py) at S = 512 / 1k / 2k / 4k, then session 33's O
# staged in the last K tile with a TMA store (bench/attention_ostage.py) at S = 512 / 1k / 2k.
#   TILES_COMMIT=<c> sh bench/device_session36c.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
timeout 300 python3 bench/attention_ostore.py 512 1024 2048 4096 2>&1 | grep -v Warning
timeout 240 python3 bench/attention_ostage.py 512 1024 2048 2>&1 | grep -v Warning
