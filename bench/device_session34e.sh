#!/bin/sh
# Session 34, last call: the block-scaled fp8 GPU tests after the shared template and launcher took the
# row-wise option (the block-scaled sources render byte for byte as at ce496f2; this runs them anyway).
#   TILES_COMMIT=<commit> sh bench/device_session34e.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
gpu_tests 170 tests/hopper/test_fp8.py tests/hopper/test_fp8_scales_tma.py tests/hopper/test_fp8_narrow.py tests/hopper/test_fp8_scales.py -k "not compiles"
