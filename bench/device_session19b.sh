#!/bin/sh
# Session 19, second call: the fp8 GEMM's scales through shared memory (smem_scales: a producer warp
# copies them with cp.async beside each stage's operands). Its GPU tests (bitwise equal to the global
# loads in every tile form) and the fp8 suites, then bench/fp8_ab.py smem back to back and in the
# suite's timing.
# Ran at 3e1650a, the commit that had the option (measured slower at four shapes of five and
# removed; bench/hopper_fp8_notes.md, session 19): check that commit out to run it again.
#   TILES_COMMIT=3e1650a sh bench/device_session19b.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
gpu_tests 200 tests/hopper/test_fp8_smem_scales.py tests/hopper/test_fp8_scales.py tests/hopper/test_fp8_narrow.py \
    tests/test_gemm_fp8.py
timeout 150 python3 bench/fp8_ab.py smem 2>&1 | tee "$OUT/fp8_smem_b2b.txt"
timeout 150 python3 bench/fp8_ab.py smem --suite 2>&1 | tr '\000' ' ' | tee "$OUT/fp8_smem_suite.txt"
