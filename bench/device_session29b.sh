#!/bin/sh
# Session 29, second call: the forward's running row sum by lanes (quad_sums, launched). The GPU test
# suites, compute-sanitizer over the attention workload, the row-sum edits of the new launched source
# (per_block: the form launched before; tree), then the standard suite (zk) and the targets' ratios.
#   TILES_COMMIT=<commit> sh bench/device_session29b.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
gpu_tests 170 -n 8 tests/cdna_emu tests/portability tests/hopper tests/test_attention_fused.py tests/test_gemm_fp8.py
WORKLOAD=attention TOOLS="synccheck racecheck" TOOL_TIMEOUT=45 sh bench/device_sanitize.sh
timeout 90 python3 bench/attention_rowsum_edits.py 2>&1 | tr -d '\000' | tail -8
RUNS=zk sh bench/device_standard_suite.sh
python3 bench/suite_ratios.py "$OUT"/H200-*zk.json
