#!/bin/sh
# Session 29, fourth call: bench/fp8_ab.py boxes on the launched kernels (8-block boxes launched; at
# 8192^3 192 x 128 tiles with them), then the standard suite's fp8 rows alone (zm): a second sample.
#   TILES_COMMIT=<commit> sh bench/device_session29d.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
timeout 120 python3 bench/fp8_ab.py boxes 2>&1 | tr -d '\000' | grep -v "bitwise vs launched: {'launched': True}$" | tail -12
timeout 150 python3 -m tiles.bench run --suite standard --kernels gemm_fp8 --reps 10 --budget 0.25 \
    --out "$OUT/H200-$(date +%F)zm.json" > "$OUT/bench_zm.txt" 2>&1
tail -1 "$OUT/bench_zm.txt"
python3 bench/suite_ratios.py "$OUT"/H200-*zm.json
