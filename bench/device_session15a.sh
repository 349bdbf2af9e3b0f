#!/bin/sh
# Session 15, first call: the clamped scale loads' GPU tests (bitwise against the checked loads), the
# rotation-off dK/dV spill expectation under the device's NVRTC, then bench/fp8_ab.py tiles.
#   sh bench/device_session15a.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
timeout 200 python3 -m pytest -q -p no:cacheprovider -W ignore tests/hopper/test_fp8_scales.py tests/hopper/test_stream_k.py \
    "tests/hopper/test_attention_lower.py" -k "scales or stream or no_rotation" -rfxX --tb=short > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR|XFAIL|XPASS)|passed|failed" "$OUT/tests.txt" | cut -c1-300 | head -20
timeout 300 python3 bench/fp8_ab.py tiles 2>&1 | tee "$OUT/fp8_ab.txt"
