#!/bin/sh
# Session 37, first call: the fp8 GEMM's rescale form (option rescale) against the launched promotion at
# the two shapes that launch the 128 x 256 ping-pong kernel, back to back and in the suite's timing.
#   sh bench/device_session37a.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
timeout 200 python3 bench/fp8_rescale_ab.py 2>&1 | grep -v Warning
timeout 200 python3 bench/fp8_rescale_ab.py --suite 2>&1 | grep -v Warning
