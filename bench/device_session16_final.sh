#!/bin/sh
# Session 16's closing call: the GPU test suites, compute-sanitizer over the attention workloads (dK/dV
# now loads LSE and Delta a block ahead and stores whole tiles untested) and over the fused backward,
# then the standard benchmark.
#   TILES_COMMIT=<commit> sh bench/device_session16_final.sh
# with <commit> typed in from the checkout that sends the tree (`git rev-parse --short HEAD` here): the
# device copy's own git names the session's base, not the commit that travelled.
. bench/device_env.sh
. bench/device_gpu_suites.sh
WORKLOAD=attention TOOLS="racecheck memcheck" TOOL_TIMEOUT=70 sh bench/device_sanitize.sh
WORKLOAD=fused TOOLS="racecheck" TOOL_TIMEOUT=60 sh bench/device_sanitize.sh
timeout 220 python3 -m tiles.bench run --suite standard --kernels gemm,gemm_fp8,attention_fwd,attention_bwd --reps 10 \
    --budget 0.25 --out "$OUT/H200-$(date +%F).json" > "$OUT/bench.txt" 2>&1
tail -2 "$OUT/bench.txt"
