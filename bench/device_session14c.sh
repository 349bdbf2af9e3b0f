#!/bin/sh
# Session 14, stream-K with its whole tiles in a loop of their own: the stream-K tests on the H200, then
# the A/B (plain kernel, stream-K kernel splitting nothing, stream-K) at the fp8 shapes.
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
timeout 120 python3 -m pytest -q -p no:cacheprovider -W ignore tests/hopper/test_stream_k.py tests/hopper/test_fp8.py \
    -rf --tb=short > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | cut -c1-300 | head -20
timeout 200 python3 bench/stream_k_ab.py 2>&1 | tee "$OUT/ab.txt"
