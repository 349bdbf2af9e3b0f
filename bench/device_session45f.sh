#!/bin/sh
# Session 45's fifth call: the fp8 clock again with the block-scaled kernel on the row-wise kernel's tiles.
#   sh bench/device_session45f.sh
DEVICE_PYTHONPATH=bench:tests/hopper:tests/portability
. bench/device_env.sh
timeout 200 python3 bench/fp8_clock.py 2>&1 | grep -a -v Warning | tr -cd '\11\12\15\40-\176' | tail -c 5000
