#!/bin/sh
# Session 28, eighth call: sa_per_group (one A-scale box per 4-block group, not one a stage): its GPU
# tests, then bench/fp8_ab.py stma back to back (stma_pg beside the launched kernels).
#   TILES_COMMIT=<commit> sh bench/device_session28e.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
gpu_tests 120 tests/hopper/test_fp8_scales_tma.py -k "per_group and gpu" -x
timeout 150 python3 bench/fp8_ab.py stma 2>&1 | tr -d '\000' | grep -v "bitwise vs launched:" | tail -10
