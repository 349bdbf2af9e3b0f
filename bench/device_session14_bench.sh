#!/bin/sh
# Session 14's closing benchmark: every kernel of the standard suite into the day's result file.
#   TILES_COMMIT=$(git rev-parse --short HEAD) sh bench/device_session14_bench.sh
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
timeout 500 python3 -m tiles.bench run --suite standard --kernels gemm,gemm_fp8,attention_fwd,attention_bwd --reps 10 \
    --budget 0.25 --out "$OUT/H200-$(date +%F).json" > "$OUT/bench.txt" 2>&1
tail -3 "$OUT/bench.txt"
