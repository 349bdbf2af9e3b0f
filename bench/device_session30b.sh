#!/bin/sh
# Session 30, second call: the fp8 GEMM's defer_store (a whole 128 x 256 tile stored under the next
# tile's first burst) on the GPU (its tests), then back to back against the launched kernel at the
# two shapes that launch 128 x 256 tiles, twice, and once in the suite's timing.
#   TILES_COMMIT=<commit> sh bench/device_session30b.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
gpu_tests 200 tests/hopper/test_fp8_defer_store.py
for i in 1 2; do timeout 120 python3 bench/fp8_ab.py defer 2>&1 | tr -d '\000' | tail -6; done
timeout 150 python3 bench/fp8_ab.py defer --suite 2>&1 | tr -d '\000' | tail -6
