#!/bin/sh
# Session 42 (the first call of the next session lent a device): the GPU suites, with session 41's decode
# and short-grid tests and session 42's few rows under GQA (tests/portability/test_attention.py::test_few_rows
# on hopper and both cdna-emu targets), then the forward at decode shapes (bench/attention_decode.py:
# the grid fix of session 41, and grouped against as-given rows for several causal rows, which sets
# tiles.api.GROUPED_CAUSAL_KEYS), after `python -m tiles demo` (now with decode rows).
#   sh bench/device_session42a.sh
DEVICE_PYTHONPATH=bench:tests/portability
. bench/device_env.sh
gpu_tests 270 -n 8 tests/cdna_emu tests/portability tests/hopper tests/test_attention_fused.py \
    tests/test_gemm_fp8.py tests/test_errors.py tests/test_lang.py tests/test_api_dispatch.py
timeout 60 python3 -m tiles demo  # the README's main job, with its decode rows
timeout 250 python3 bench/attention_decode.py 2>&1 | grep -v -i "warning\|scaled_dot_product_attention("
