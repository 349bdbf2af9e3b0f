#!/bin/sh
# Session 35, third call: 2-CTA clusters launched on 128 x 128 tiles split by stream-K (cluster_pays).
# The fp8 GPU suites (compile-only tests left to the CPU), tiles.gemm_fp8 against the float64 bound at
# the issue shapes with the launcher's choice, then the standard suite's fp8 rows (zu) and their ratios.
#   TILES_COMMIT=<commit> sh bench/device_session35c.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
gpu_tests 250 tests/hopper/test_fp8.py tests/hopper/test_fp8_scales_tma.py tests/hopper/test_fp8_narrow.py \
    tests/hopper/test_fp8_scales.py tests/hopper/test_stream_k.py tests/hopper/test_fp8_defer_store.py \
    tests/hopper/test_fp8_rowwise.py tests/test_gemm_fp8.py -k "not compile"
timeout 200 python3 -m tiles.bench run --suite standard --kernels gemm_fp8 --reps 10 --budget 0.25 \
    --out "$OUT/H200-$(date +%F)zu.json" > "$OUT/bench_zu.txt" 2>&1
tail -1 "$OUT/bench_zu.txt"
python3 bench/suite_ratios.py "$OUT"/H200-*zu.json
