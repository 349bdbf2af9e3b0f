#!/bin/sh
# Session 26, sixth call: the fp8 scales read after the previous block's last use (`late`), beside
# `reorder` and the bounds (bench/fp8_promote_edits.py edits), back to back and in the suite's timing.
#   TILES_COMMIT=<commit> sh bench/device_session26f.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
timeout 250 python3 bench/fp8_promote_edits.py edits 2>&1 | tail -12
timeout 200 python3 bench/fp8_promote_edits.py edits --suite 2>&1 | tail -12
