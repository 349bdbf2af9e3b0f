#!/bin/sh
# Session 14, first device call: the GEMM tile-width choice through tiles.gemm (hopper lowering tests,
# portability GEMM tests on the H200), then the wave probe (bench/wave_probe.py).
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
timeout 90 python3 -m pytest -q -p no:cacheprovider -n 8 -W ignore tests/hopper/test_lower.py \
    tests/portability/test_gemm_norm_rotary.py -k "hopper or not cdna" -rf --tb=short > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | cut -c1-200 | head -20
timeout 200 python3 bench/wave_probe.py 2>&1 | tee "$OUT/wave.txt" | tail -20
