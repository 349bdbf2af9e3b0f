#!/bin/sh
# Session 19, last call: after the TMA-write refusal was keyed on how a tensor is used, the attention
# schedule tests and the portability suite's attention and fp8 tests on the H200.
#   TILES_COMMIT=<commit> sh bench/device_session19f.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 8 -W ignore tests/hopper/test_attention_schedule.py \
    tests/hopper/test_attention_lower.py tests/portability -rfs --tb=short > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | cut -c1-200 | head -20
