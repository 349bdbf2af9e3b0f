#!/bin/sh
# Session 26, first call: the fp8 promotion's FFMAs grouped by row scale beside three bounds
# (bench/fp8_promote_edits.py edits), back to back and in the suite's timing. At 2fe5c06, where it
# ran, the set also held the scales two blocks ahead (option scale_ahead, since removed); the sixth
# call (device_session26f.sh) ran the set as it is now.
#   TILES_COMMIT=<commit> sh bench/device_session26a.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
timeout 280 python3 bench/fp8_promote_edits.py 2>&1 | tail -12
timeout 200 python3 bench/fp8_promote_edits.py --suite 2>&1 | tail -12
