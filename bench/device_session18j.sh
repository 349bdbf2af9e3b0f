#!/bin/sh
# Session 18, tenth call: the standard suite once more at the final commit (its kernels are 098dbb1's),
# a third sample of the ratios the closing call measured twice.
#   TILES_COMMIT=<the sending checkout's commit> sh bench/device_session18j.sh
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
timeout 170 python3 -m tiles.bench run --suite standard --kernels gemm,gemm_fp8,attention_fwd,attention_bwd --reps 10 \
    --budget 0.25 --out "$OUT/H200-$(date +%F)i.json" > "$OUT/bench.txt" 2>&1
tail -1 "$OUT/bench.txt"
