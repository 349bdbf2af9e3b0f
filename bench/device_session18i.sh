#!/bin/sh
# Session 18, ninth call: the fp8 GPU tests once more after their float64 bound moved into
# tiles.bench.fp8.error_and_bound (a refactor after the closing call), and the GEMM tests.
#   sh bench/device_session18i.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
gpu_tests 200 tests/hopper/test_fp8_narrow.py tests/hopper/test_fp8_scales.py tests/hopper/test_stream_k.py \
    tests/test_gemm_fp8.py tests/portability/test_gemm_fp8_blockscaled.py
