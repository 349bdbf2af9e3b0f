#!/bin/sh
# Session 41: the fp8 GEMM's clock (bench/fp8_clock.py, prepared in session 38 and not yet run).
#   sh bench/device_session41c.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
timeout 240 python3 bench/fp8_clock.py 2>&1 | grep -v Warning
