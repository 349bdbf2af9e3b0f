#!/bin/sh
# Session 13's last device call: the GEMM's tile-width choice, checked (hopper GEMM lowering tests and the
# portability GEMM tests on the H200), then the standard benchmark of every kernel into the result file.
#   TILES_COMMIT=$(git rev-parse --short HEAD) sh bench/device_session13_gemm.sh
. bench/device_env.sh
timeout 60 python3 -m pytest -q -p no:cacheprovider -n 8 -W ignore tests/hopper/test_lower.py \
    tests/portability/test_gemm_norm_rotary.py -k "hopper or not cdna" -rf --tb=short > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | cut -c1-200 | head -20
timeout 150 python3 -m tiles.bench run --suite standard --kernels gemm,gemm_fp8,attention_fwd,attention_bwd --reps 10 \
    --budget 0.25 --out "$OUT/H200-$(date +%F).json" > "$OUT/bench.txt" 2>&1
tail -2 "$OUT/bench.txt"
