#!/bin/sh
# Session 30, fourth call: the defer_store tests again (the compile test reads the cubin's resources
# where the ptxas log has none), then the standard suite's fp8 rows alone (zo): a second sample.
#   TILES_COMMIT=<commit> sh bench/device_session30c.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
gpu_tests 150 tests/hopper/test_fp8_defer_store.py
timeout 150 python3 -m tiles.bench run --suite standard --kernels gemm_fp8 --reps 10 --budget 0.25 \
    --out "$OUT/H200-$(date +%F)zo.json" > "$OUT/bench_zo.txt" 2>&1
tail -1 "$OUT/bench_zo.txt"
python3 bench/suite_ratios.py "$OUT"/H200-*zo.json
