#!/bin/sh
# Session 18, first call: the bf16 GEMM's store deferred under the next tile's first k-block
# (gemm.cu.j2 option deferred_store): its bit tests on the GPU, then bench/deferred_store_ab.py at the
# standard suite's ten GEMM shapes against the launched kernel and cuBLAS.
#   sh bench/device_session18a.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
gpu_tests 150 tests/hopper/test_layout_probe.py -k "deferred or ir_lowered"
timeout 300 python3 bench/deferred_store_ab.py 2>&1 | tee "$OUT/ab.txt"
