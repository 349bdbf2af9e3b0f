#!/bin/sh
# Session 29, first call: the launcher's per-group A-scale boxes (tma_scale_options, restored from
# c811fbf) checked on the GPU (the fp8 tests, compute-sanitizer over the fp8 workload, which now
# launches them), then the D = 128 forward's row-sum edits (bench/attention_rowsum_edits.py) beside
# the launched kernel and cuDNN, then the standard suite's fp8 rows alone (zj).
#   TILES_COMMIT=<commit> sh bench/device_session29a.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
gpu_tests 170 -n 4 tests/hopper/test_fp8.py tests/test_gemm_fp8.py tests/hopper/test_fp8_scales_tma.py -k "not compile"
WORKLOAD=gemm_fp8 TOOLS="synccheck racecheck memcheck" TOOL_TIMEOUT=60 sh bench/device_sanitize.sh
timeout 150 python3 bench/attention_rowsum_edits.py 2>&1 | tr -d '\000' | tail -12
timeout 170 python3 -m tiles.bench run --suite standard --kernels gemm_fp8 --reps 10 --budget 0.25 \
    --out "$OUT/H200-$(date +%F)zj.json" > "$OUT/bench_zj.txt" 2>&1
tail -1 "$OUT/bench_zj.txt"
python3 bench/suite_ratios.py "$OUT"/H200-*zj.json
