#!/bin/sh
# Session 38: the SM clock and cycles inside the fp8 GEMM (bench/fp8_clock.py): the launched
# block-scaled kernel, the row-wise kernel on the same tiles, and the row-wise kernel's own tiles, at
# 8192³ and 6144 x 7168 x 2304, rested launches interleaved, beside row-wise _scaled_mm.
#   sh bench/device_session38h.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
timeout 200 python3 bench/fp8_clock.py 2>&1 | grep -v Warning
