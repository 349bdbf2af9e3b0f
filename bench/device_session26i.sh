#!/bin/sh
# Session 26, ninth and tenth calls: option scale_table (a consumer warpgroup's fp8 scales in shared
# memory, two windows of 8 or 16 K blocks filled by its own cp.async copies), checked bitwise at odd
# shapes, then timed at the three shapes with 96- or 128-wide tiles (bench/fp8_promote_edits.py).
#   TILES_COMMIT=<commit> sh bench/device_session26i.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
timeout 150 python3 bench/fp8_promote_edits.py odd 2>&1 | tail -12
timeout 200 python3 bench/fp8_promote_edits.py scale_table 2>&1 | tail -12
timeout 200 python3 bench/fp8_promote_edits.py scale_table --suite 2>&1 | tail -12
