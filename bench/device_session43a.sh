#!/bin/sh
# Session 43 (the first call of the next session lent a device; supersedes device_session42a.sh): the GPU
# suites, now with caches of ragged lengths and paged caches (tests/portability/test_attention.py::
# test_ragged_cache, test_paged_cache on hopper and both cdna-emu targets; tests/hopper/test_split_tail.py::
# test_ragged_cache_in_a_cuda_graph, test_paged_cache_in_a_cuda_graph), sliding windows forward and backward
# (test_sliding_window*), session 42's few rows under GQA and session 41's decode tests; `python -m tiles demo`;
# then the forward at decode shapes (bench/attention_decode.py: grouped against as-given rows, which sets
# tiles.api.GROUPED_CAUSAL_KEYS) and at ragged cache lengths (--ragged: cache_seqlens, the same keys paged,
# a call a sequence, the whole cache and SDPA with a key-padding mask).
#   sh bench/device_session43a.sh
DEVICE_PYTHONPATH=bench:tests/portability
. bench/device_env.sh
gpu_tests 270 -n 8 tests/cdna_emu tests/portability tests/hopper tests/test_attention_fused.py \
    tests/test_gemm_fp8.py tests/test_errors.py tests/test_lang.py tests/test_api_dispatch.py
timeout 60 python3 -m tiles demo  # the README's main job, with its decode rows
timeout 200 python3 bench/attention_decode.py 2>&1 | grep -v -i "warning\|scaled_dot_product_attention("
timeout 120 python3 bench/attention_decode.py --ragged 2>&1 | grep -v -i "warning\|scaled_dot_product_attention("
