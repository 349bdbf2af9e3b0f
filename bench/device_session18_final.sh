#!/bin/sh
# Session 18's closing call: the GPU test suites; compute-sanitizer over the attention workloads and
# over the default workload (now with 128 x 256 bf16 tiles stored under the next tile's first k-block,
# and the fp8 GEMM's 128 x 96 tiles at 200 x 300 x 1000, whose tiles meet all three scale splits);
# then the standard suite twice, to see how far its ratios move between two runs of the same kernels.
#   TILES_COMMIT=<commit> sh bench/device_session18_final.sh
# with <commit> typed in from the checkout that sends the tree (`git rev-parse --short HEAD` there).
. bench/device_env.sh
. bench/device_gpu_suites.sh
WORKLOAD=attention TOOLS="racecheck memcheck" TOOL_TIMEOUT=70 sh bench/device_sanitize.sh
python3 bench/sanitize_suite.py 2>&1 | tail -1  # warm the kernel cache outside the sanitizers
for tool in memcheck racecheck synccheck; do  # the default workload: every suite kernel at small shapes with tails
    echo "== $tool (default workload)" | tee -a "$OUT/sanitizer.txt"
    timeout 60 compute-sanitizer --tool "$tool" --report-api-errors no --print-limit 2 python3 bench/sanitize_suite.py 2>&1 \
        | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|sanitize_suite:|Invalid|Race|Hazard" | sort | uniq -c | head -12 \
        | tee -a "$OUT/sanitizer.txt"
done
for run in g h; do
    timeout 200 python3 -m tiles.bench run --suite standard --kernels gemm,gemm_fp8,attention_fwd,attention_bwd --reps 10 \
        --budget 0.25 --out "$OUT/H200-$(date +%F)$run.json" > "$OUT/bench_$run.txt" 2>&1
    tail -1 "$OUT/bench_$run.txt"
done
