#!/bin/sh
# Session 26, fourth call: the launched fp8 GEMM on a_scale stored K-major (a warp's rows' scales of a
# K block in one sector) beside the standard storage and the l1 bound (bench/fp8_promote_edits.py layout).
#   TILES_COMMIT=<commit> sh bench/device_session26d.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
timeout 200 python3 bench/fp8_promote_edits.py layout 2>&1 | tail -12
timeout 200 python3 bench/fp8_promote_edits.py layout --suite 2>&1 | tail -12
