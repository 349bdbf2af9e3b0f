#!/bin/sh
# Session 41: the GPU suites (with the decode tests: the api's grouped rows on hopper and both cdna-emu
# targets, short grids cut along the keys on a grid as long as its units), then the forward at decode
# shapes (bench/attention_decode.py: the api, the launcher on the rows as given, 16 forced parts,
# SDPA's backends).
#   sh bench/device_session41a.sh
DEVICE_PYTHONPATH=bench:tests/portability
. bench/device_env.sh
gpu_tests 320 -n 8 tests/cdna_emu tests/portability tests/hopper tests/test_attention_fused.py \
    tests/test_gemm_fp8.py tests/test_errors.py tests/test_lang.py tests/test_api_dispatch.py
timeout 250 python3 bench/attention_decode.py 2>&1 | grep -v -i "warning\|scaled_dot_product_attention("
