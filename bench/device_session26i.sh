#!/bin/sh
# Session 26, ninth call: option scale_table (a consumer warpgroup's fp8 scales in shared memory, two
# windows of 8 or 16 K blocks filled by its own cp.async copies) at the three shapes with 96- or
# 128-wide tiles (bench/fp8_promote_edits.py scale_table), back to back and in the suite's timing.
#   TILES_COMMIT=<commit> sh bench/device_session26i.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
timeout 200 python3 bench/fp8_promote_edits.py scale_table 2>&1 | tail -12
timeout 200 python3 bench/fp8_promote_edits.py scale_table --suite 2>&1 | tail -12
