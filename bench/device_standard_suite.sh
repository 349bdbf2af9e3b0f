#!/bin/sh
# The standard suite once per name in RUNS (default: "a"), each into $OUT/H200-<date><name>.json, with
# its last line printed: several runs of the same kernels in one call show how far the ratios move.
#   RUNS="i j" sh bench/device_standard_suite.sh
. bench/device_env.sh
for run in ${RUNS:-a}; do
    timeout 200 python3 -m tiles.bench run --suite standard --kernels gemm,gemm_fp8,attention_fwd,attention_bwd --reps 10 \
        --budget 0.25 --out "$OUT/H200-$(date +%F)$run.json" > "$OUT/bench_$run.txt" 2>&1
    tail -1 "$OUT/bench_$run.txt"
done
