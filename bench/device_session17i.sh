#!/bin/sh
# Session 17, ninth call: the standard suite once more at the closing code (tiles/ as at cfde9d7),
# to see how far its ratios move between two runs of the same kernels.
#   TILES_COMMIT=<the sending checkout's commit> sh bench/device_session17i.sh
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
timeout 220 python3 -m tiles.bench run --suite standard --kernels gemm,gemm_fp8,attention_fwd,attention_bwd --reps 10 \
    --budget 0.25 --out "$OUT/H200-$(date +%F)e.json" > "$OUT/bench.txt" 2>&1
tail -2 "$OUT/bench.txt"
