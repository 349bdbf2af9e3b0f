#!/bin/sh
# Session 31, first call: ptxas --register-usage-level 2 and 6 against the launched level (5) on the
# D = 128 forward (beside cuDNN) and at the five fp8 shapes (beside row-wise _scaled_mm).
#   TILES_COMMIT=<commit> sh bench/device_session31a.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit --format=csv,noheader
timeout 260 python3 bench/ptxas_levels.py attention 2>&1 | tr -d '\000' | grep -v Warning
timeout 300 python3 bench/ptxas_levels.py fp8 2>&1 | tr -d '\000' | grep -v Warning
