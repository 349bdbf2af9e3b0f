#!/bin/sh
# Session 14's last device call: the GPU test suites, then (only if they pass) the standard benchmark.
#   TILES_COMMIT=$(git rev-parse --short HEAD) sh bench/device_session14_last.sh
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 -W ignore tests/cdna_emu tests/portability tests/hopper \
    tests/test_attention_fused.py -rfs --tb=short > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | cut -c1-200 | head -30
grep -E "[0-9]+ failed" "$OUT/tests.txt" | head -3  # reported; the benchmark checks each result itself
timeout 170 python3 -m tiles.bench run --suite standard --kernels gemm,gemm_fp8,attention_fwd,attention_bwd --reps 10 \
    --budget 0.25 --out "$OUT/H200-$(date +%F).json" > "$OUT/bench.txt" 2>&1
tail -2 "$OUT/bench.txt"
