#!/bin/sh
# Session 19's closing call: the GPU test suites; compute-sanitizer over the attention workloads (now
# with D = 64 forwards of 1000 queries, whose O leaves through TMA stores, and dQ at D = 128 the same
# way) and over the default workload; then the standard suite twice.
#   TILES_COMMIT=<commit> sh bench/device_session19_final.sh
# with <commit> typed in from the checkout that sends the tree (`git rev-parse --short HEAD` there).
. bench/device_env.sh
. bench/device_gpu_suites.sh
WORKLOAD=attention TOOLS="racecheck synccheck memcheck" TOOL_TIMEOUT=80 sh bench/device_sanitize.sh
python3 bench/sanitize_suite.py 2>&1 | tail -1  # warm the kernel cache outside the sanitizers
for tool in memcheck racecheck synccheck; do  # the default workload: every suite kernel at small shapes with tails
    echo "== $tool (default workload)" | tee -a "$OUT/sanitizer.txt"
    timeout 60 compute-sanitizer --tool "$tool" --report-api-errors no --print-limit 2 python3 bench/sanitize_suite.py 2>&1 \
        | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|sanitize_suite:|Invalid|Race|Hazard" | sort | uniq -c | head -12 \
        | tee -a "$OUT/sanitizer.txt"
done
for run in i j; do
    timeout 200 python3 -m tiles.bench run --suite standard --kernels gemm,gemm_fp8,attention_fwd,attention_bwd --reps 10 \
        --budget 0.25 --out "$OUT/H200-$(date +%F)$run.json" > "$OUT/bench_$run.txt" 2>&1
    tail -1 "$OUT/bench_$run.txt"
done
