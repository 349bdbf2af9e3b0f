#!/bin/sh
# Session 26, first call: the fp8 promotion's scale loads two blocks ahead and its FFMAs grouped by row
# scale, beside three bounds (bench/fp8_promote_edits.py), back to back and in the suite's timing.
#   TILES_COMMIT=<commit> sh bench/device_session26a.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
timeout 280 python3 bench/fp8_promote_edits.py 2>&1 | tail -12
timeout 200 python3 bench/fp8_promote_edits.py --suite 2>&1 | tail -12
