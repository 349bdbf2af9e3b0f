#!/bin/sh
# Session 34, second fp8 call: the row-wise fp8 GEMM (gemm_fp8_rowwise, option rowwise) on the GPU. Its
# tests and the block-scaled fp8 tests around the shared template, then the standard suite's fp8 rows
# (block-scaled and row-wise, each beside row-wise _scaled_mm), and their ratios.
#   TILES_COMMIT=<commit> sh bench/device_session34b.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
gpu_tests 200 tests/hopper/test_fp8_rowwise.py tests/hopper/test_fp8_defer_store.py tests/test_gemm_fp8.py
timeout 200 python3 -m tiles.bench run --suite standard --kernels gemm_fp8 --reps 10 --budget 0.25 \
    --out "$OUT/H200-$(date +%F)zs.json" > "$OUT/bench_zs.txt" 2>&1
tail -1 "$OUT/bench_zs.txt"
python3 bench/suite_ratios.py "$OUT"/H200-*zs.json
