#!/bin/sh
# Session 34, third fp8 call: the row-wise kernel with its scales applied per 64-column chunk as the
# epilogue stores it (under the next tile's first burst with the deferred store): its tests, then
# bench/fp8_rowwise_ab.py (tile and store candidates beside row-wise _scaled_mm).
#   TILES_COMMIT=<commit> sh bench/device_session34c.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
gpu_tests 150 tests/hopper/test_fp8_rowwise.py
timeout 300 python3 bench/fp8_rowwise_ab.py 2>&1 | grep -v Warning
