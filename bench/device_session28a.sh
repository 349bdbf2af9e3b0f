#!/bin/sh
# Session 28, first call: scale rows that are not 16-byte aligned (K/128 not a multiple of 4) by TMA,
# two or four rows at a time (sa_group / sb_group): the GPU tests, compute-sanitizer memcheck over the
# fp8 workload (grouped rows in it), bench/fp8_ab.py stma back to back and in the suite's timing, then
# ncu hot spots of 1024 x 4608 x 7168's 128 x 128 stream-K tiles with the scales by TMA and by loads.
#   TILES_COMMIT=<commit> sh bench/device_session28a.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
. bench/ncu_hot.sh
gpu_tests 200 tests/hopper/test_fp8_scales_tma.py -k "gpu or refused" -x
gpu_tests 150 tests/hopper/test_fp8.py tests/test_gemm_fp8.py -x
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 python3 bench/sanitize_suite.py --only gemm_fp8 2>&1 | tail -3
timeout 120 python3 bench/fp8_ab.py stma 2>&1 | tail -16
timeout 150 python3 bench/fp8_ab.py stma --suite 2>&1 | tail -16
HOT_ROWS=10 hot stma_sk gemm_fp8 bench/profile_fp8.py ab:stma:stma 1024 4608 7168
HOT_ROWS=10 hot global_sk gemm_fp8 bench/profile_fp8.py ab:stma:global 1024 4608 7168
