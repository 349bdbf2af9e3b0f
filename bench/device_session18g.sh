#!/bin/sh
# Session 18, seventh call: the fp8 GEMM's 128 x 96 tiles (the launcher's at 1024 x 1536 x 7168, where
# 96 tiles of 128 x 128 leave 36 SMs idle): their GPU tests and the fp8 suites, then bench/fp8_ab.py
# narrow back to back and in the suite's timing.
#   sh bench/device_session18g.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
gpu_tests 200 tests/hopper/test_fp8_narrow.py tests/test_gemm_fp8.py tests/portability/test_gemm_fp8_blockscaled.py \
    tests/hopper/test_fp8_scales.py
timeout 120 python3 bench/fp8_ab.py narrow 2>&1 | tee "$OUT/fp8_narrow_b2b.txt"
timeout 120 python3 bench/fp8_ab.py narrow --suite 2>&1 | tr '\000' ' ' | tee "$OUT/fp8_narrow_suite.txt"
