#!/bin/sh
# Session 27, ninth call: the fp8 GPU tests with the launcher's rule widened to unsplit 128 x 128 tiles.
#   TILES_COMMIT=<commit> sh bench/device_session27f.sh
. bench/device_env.sh
gpu_tests 130 -n 4 tests/test_gemm_fp8.py tests/hopper -k fp8
