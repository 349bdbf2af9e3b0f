#!/bin/sh
# Session 28, fifth call: the launcher now takes M-contiguous scales by TMA with 128 x 128 stream-K tiles
# too. The fp8 GPU tests, then the standard suite's fp8 rows alone (zi: the transposed-storage row,
# tiles_kmajor_copy, runs 1024 x 4608 x 7168 on those scales), then bench/fp8_ab.py stma once more.
#   TILES_COMMIT=<commit> sh bench/device_session28d.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
gpu_tests 200 tests/hopper/test_fp8_scales_tma.py tests/hopper/test_fp8.py tests/test_gemm_fp8.py -k "not compile"
timeout 150 python3 -m tiles.bench run --suite standard --kernels gemm_fp8 --reps 10 --budget 0.25 \
    --out "$OUT/H200-$(date +%F)zi.json" > "$OUT/bench_zi.txt" 2>&1
tail -1 "$OUT/bench_zi.txt"
python3 bench/suite_ratios.py "$OUT"/H200-*zi.json
timeout 150 python3 bench/fp8_ab.py stma 2>&1 | grep -v "bitwise vs launched:" | tail -10
