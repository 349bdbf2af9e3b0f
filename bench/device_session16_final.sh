#!/bin/sh
# Session 16's closing call: the GPU test suites, compute-sanitizer over the attention workloads (dK/dV
# now loads LSE and Delta a block ahead and stores whole tiles untested) and over the fused backward,
# then the standard benchmark.
#   TILES_COMMIT=<commit> sh bench/device_session16_final.sh
# with <commit> typed in from the checkout that sends the tree (`git rev-parse --short HEAD` here): the
# device copy's own git names the session's base, not the commit that travelled.
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
timeout 220 python3 -m pytest -q -p no:cacheprovider -n 8 -W ignore tests/cdna_emu tests/portability tests/hopper \
    tests/test_attention_fused.py tests/test_gemm_fp8.py -rfs --tb=short > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR|XFAIL)|passed|failed" "$OUT/tests.txt" | cut -c1-200 | head -30
WORKLOAD=attention TOOLS="racecheck memcheck" TOOL_TIMEOUT=70 sh bench/device_sanitize.sh
WORKLOAD=fused TOOLS="racecheck" TOOL_TIMEOUT=60 sh bench/device_sanitize.sh
timeout 220 python3 -m tiles.bench run --suite standard --kernels gemm,gemm_fp8,attention_fwd,attention_bwd --reps 10 \
    --budget 0.25 --out "$OUT/H200-$(date +%F).json" > "$OUT/bench.txt" 2>&1
tail -2 "$OUT/bench.txt"
