#!/bin/sh
# Session 35, first call: stream-K in 2-CTA clusters (the fp8 GEMM's shares counted per cluster): its
# GPU tests, what the board's power limit does to the attention forward and the fp8 GEMM
# (bench/gpu_power.py), and the launched fp8 tiles against the same in clusters, back to back and in
# the suite's timing (bench/fp8_ab.py clusters).
#   TILES_COMMIT=<commit> sh bench/device_session35a.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
gpu_tests 150 tests/hopper/test_stream_k.py
timeout 120 python3 bench/gpu_power.py 2>&1 | grep -v Warning
timeout 150 python3 bench/fp8_ab.py clusters 2>&1 | grep -v Warning
timeout 150 python3 bench/fp8_ab.py clusters --suite 2>&1 | grep -v Warning
