#!/bin/sh
# Session 28, ninth call: the launcher now takes one A-scale box per 4-block group with 128 x 128
# stream-K and 192 x 128 tiles (K-contiguous scales). The fp8 GPU tests (tiles.gemm_fp8 and the TMA-scale
# kernels), then the standard suite's fp8 rows alone (zj).
#   TILES_COMMIT=<commit> sh bench/device_session28f.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
gpu_tests 150 tests/hopper/test_fp8.py tests/test_gemm_fp8.py tests/hopper/test_fp8_scales_tma.py -k "not compile and (not scales_tma or per_group or launcher)"
timeout 150 python3 -m tiles.bench run --suite standard --kernels gemm_fp8 --reps 10 --budget 0.25 \
    --out "$OUT/H200-$(date +%F)zj.json" > "$OUT/bench_zj.txt" 2>&1
tail -1 "$OUT/bench_zj.txt"
python3 bench/suite_ratios.py "$OUT"/H200-*zj.json
