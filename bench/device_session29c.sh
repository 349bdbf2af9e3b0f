#!/bin/sh
# Session 29, closing call: the GPU test suites, compute-sanitizer over the fp8 workload (the launcher's
# 8-block A-scale boxes, sa_box_blocks=8) and the attention workload (the forward's row sum by lanes,
# quad_sums), then the standard suite (zl) and the targets' ratios.
#   TILES_COMMIT=<commit> sh bench/device_session29c.sh
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
timeout 170 python3 -m pytest -q -p no:cacheprovider -n 8 -W ignore tests/cdna_emu tests/portability tests/hopper \
    tests/test_attention_fused.py tests/test_gemm_fp8.py -rfs --tb=short > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | cut -c1-200 | head -20
DEVICE_PYTHONPATH=bench WORKLOAD=gemm_fp8 TOOLS="synccheck racecheck memcheck" TOOL_TIMEOUT=40 sh bench/device_sanitize.sh
DEVICE_PYTHONPATH=bench WORKLOAD=attention TOOLS="synccheck racecheck" TOOL_TIMEOUT=40 sh bench/device_sanitize.sh
RUNS=zl sh bench/device_standard_suite.sh
python3 bench/suite_ratios.py "$OUT"/H200-*zl.json
