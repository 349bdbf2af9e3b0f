#!/bin/sh
# Session 41's second call: the GPU suites (with the decode tests of the api's grouped rows), then
# compute-sanitizer over the ring / split attention workloads (not run since 413ca9e; the split merge
# changed in session 40).
#   sh bench/device_session41b.sh
. bench/device_env.sh
gpu_tests 330 -n 8 tests/cdna_emu tests/portability tests/hopper tests/test_attention_fused.py \
    tests/test_gemm_fp8.py tests/test_errors.py tests/test_lang.py tests/test_api_dispatch.py
DEVICE_PYTHONPATH=bench WORKLOAD=ring TOOLS="synccheck racecheck memcheck" TOOL_TIMEOUT=70 sh bench/device_sanitize.sh
