#!/bin/sh
# Session 14, second device call: stream-K in the fp8 GEMM. Its tests on the H200 (small grids, so tiles
# split into many shares, against float64 and bitwise run to run), then the variant sweep: stream-K at
# both tile widths next to the launcher's choices and the baselines.
#   sh bench/device_session14b.sh
DEVICE_PYTHONPATH=tests/hopper
. bench/device_env.sh
timeout 120 python3 -m pytest -q -p no:cacheprovider -W ignore tests/hopper/test_stream_k.py tests/hopper/test_fp8.py \
    -rf --tb=short > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | cut -c1-300 | head -20
FP8_VARIANTS=${FP8_VARIANTS:-sk,bn256_pp,bn256_pp_sk} SMOKE_S=120 FULL_S=240 sh bench/device_fp8_variants.sh > "$OUT/variants.txt" 2>&1
grep -E "FAIL|OKVAR|BADVAR|full run|^\|" "$OUT/variants.txt" | head -40
