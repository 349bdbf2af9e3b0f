#!/bin/sh
# Session 18, fifth call: the fp8 GEMM with the scale loads' K offsets in 32 bits (scale_index32, now
# launched where they fit) against 64 bits, and its tile order (group 4 / 12 / 16 / 24 against the
# launched 8): the fp8 tests on the GPU, then bench/fp8_ab.py groups timed as the suite times and
# back to back.
#   sh bench/device_session18e.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
gpu_tests 200 tests/test_gemm_fp8.py tests/portability/test_gemm_fp8_blockscaled.py tests/hopper/test_fp8.py \
    tests/hopper/test_fp8_scales.py tests/hopper/test_stream_k.py
timeout 150 python3 bench/fp8_ab.py groups --suite 2>&1 | tee "$OUT/fp8_groups_suite.txt"
timeout 150 python3 bench/fp8_ab.py groups 2>&1 | tee "$OUT/fp8_groups_b2b.txt"
