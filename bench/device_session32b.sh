#!/bin/sh
# Session 32, last call: the split forward's GPU tests again, with its CUDA-graph test, and the
# portability attention suite (the split launched from 4k keys is not reached there: short shapes).
#   TILES_COMMIT=<commit> sh bench/device_session32b.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
gpu_tests 200 -n 4 tests/hopper/test_split_tail.py tests/test_split.py tests/hopper/test_graph_capture.py
