#!/bin/sh
# Session 34, fourth fp8 call: the row-wise kernel's own tile choice (lower_fp8.ROWWISE_SPEEDS): its tests,
# bench/fp8_rowwise_ab.py against the block-scaled choice and the other candidates, then the standard
# suite's fp8 rows (zt) and their ratios.
#   TILES_COMMIT=<commit> sh bench/device_session34d.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
gpu_tests 150 tests/hopper/test_fp8_rowwise.py
timeout 200 python3 bench/fp8_rowwise_ab.py 2>&1 | grep -v Warning
timeout 200 python3 -m tiles.bench run --suite standard --kernels gemm_fp8 --reps 10 --budget 0.25 \
    --out "$OUT/H200-$(date +%F)zt.json" > "$OUT/bench_zt.txt" 2>&1
tail -1 "$OUT/bench_zt.txt"
python3 bench/suite_ratios.py "$OUT"/H200-*zt.json
