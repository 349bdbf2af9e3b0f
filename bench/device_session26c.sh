#!/bin/sh
# Session 26, third call: the fp8 scales two K blocks ahead in two alternating sets (option scale_ahead=2,
# the loops without overlap), and 192 x 128 tiles with it where the launcher takes 128 x 256 ones
# (bench/fp8_promote_edits.py ahead), back to back and in the suite's timing.
#   TILES_COMMIT=<commit> sh bench/device_session26c.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
timeout 250 python3 bench/fp8_promote_edits.py ahead 2>&1 | tail -12
timeout 200 python3 bench/fp8_promote_edits.py ahead --suite 2>&1 | tail -12
