#!/bin/sh
# Session 18, third call: the bf16 GEMM's tile order (group_m 12 / 16 / 24 against the launched 8) and
# the deferred store with group 16, timed as the standard suite times, at its ten GEMM shapes; then
# the five shapes once more in the back-to-back timing (20 launches a sample).
#   sh bench/device_session18c.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
timeout 300 python3 bench/deferred_store_ab.py --suite --variants g12,g16,g24,ds_g16 2>&1 | tee "$OUT/ab_suite.txt"
timeout 200 python3 bench/deferred_store_ab.py --variants g16,ds_g16 4096,4096,4096 8192,8192,8192 16384,8192,8192 \
    8192,8192,2048 4096,14336,4096 2>&1 | tee "$OUT/ab_b2b.txt"
