#!/bin/sh
# Prepared in session 14 for the next device session: the fp8 GEMM's clamp_scales option, its GPU tests
# (bitwise against the checked loads, float64 bound), then the A/B at the shapes.
#   sh bench/device_next_fp8.sh
# If it wins everywhere: make clamp_scales the default (lower_fp8.DEFAULTS), then run the standard suite.
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
timeout 150 python3 -m pytest -q -p no:cacheprovider -W ignore tests/hopper/test_fp8_scales.py tests/hopper/test_stream_k.py \
    -rf --tb=short > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | cut -c1-300 | head -20
timeout 200 python3 bench/clamp_scales_ab.py 2>&1 | tee "$OUT/clamp_ab.txt"
