#!/bin/sh
# Session 17's closing call: the GPU test suites; compute-sanitizer over the attention workloads and
# over the default workload (the GEMM's 128 x 64 tiles and the fp8 GEMM now store from registers, 4
# pairs a store; the D = 64 causal forward at S = 300 takes 128 rows); then the standard benchmark.
#   TILES_COMMIT=<commit> sh bench/device_session17_final.sh
# with <commit> typed in from the checkout that sends the tree (`git rev-parse --short HEAD` there).
. bench/device_env.sh
. bench/device_gpu_suites.sh
WORKLOAD=attention TOOLS="racecheck memcheck" TOOL_TIMEOUT=70 sh bench/device_sanitize.sh
for tool in memcheck racecheck; do  # the default workload: every suite kernel at small shapes with tails
    echo "== $tool (default workload)" | tee -a "$OUT/sanitizer.txt"
    timeout 60 compute-sanitizer --tool "$tool" --report-api-errors no --print-limit 2 python3 bench/sanitize_suite.py 2>&1 \
        | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|sanitize_suite:|Invalid|Race|Hazard" | sort | uniq -c | head -12 \
        | tee -a "$OUT/sanitizer.txt"
done
timeout 220 python3 -m tiles.bench run --suite standard --kernels gemm,gemm_fp8,attention_fwd,attention_bwd --reps 10 \
    --budget 0.25 --out "$OUT/H200-$(date +%F)d.json" > "$OUT/bench.txt" 2>&1
tail -2 "$OUT/bench.txt"
