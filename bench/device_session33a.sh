#!/bin/sh
# Session 33, first call: the split forward's GPU tests with its CUDA-graph test (not yet run on the
# GPU), bench/attention_timeline.py (where a D = 128 query tile's time goes, from SM clocks) and
# bench/attention_carry.py (the last P V and the epilogue carried into the next tile's first turn).
#   TILES_COMMIT=<commit> sh bench/device_session33a.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
gpu_tests 200 -n 4 tests/hopper/test_split_tail.py tests/test_split.py tests/hopper/test_graph_capture.py
timeout 300 python3 bench/attention_timeline.py 2>&1 | tr -d '\000' | grep -v Warning
timeout 300 python3 bench/attention_carry.py 2>&1 | tr -d '\000' | grep -v Warning
