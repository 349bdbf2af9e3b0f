#!/bin/sh
# Session 18, second call: the bf16 GEMM's deferred store and its tile order (group_m 16 / 4) timed
# the way the standard suite times (one launch behind the sleep kernel, inputs rotated past L2), at
# the suite's ten GEMM shapes, interleaved with the launched kernel and cuBLAS.
#   sh bench/device_session18b.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
timeout 400 python3 bench/deferred_store_ab.py --suite --variants deferred,g16,ds_g16 2>&1 | tee "$OUT/ab.txt"
