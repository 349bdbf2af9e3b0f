#!/bin/sh
# Session 29, second call: the forward's running row sum by lanes (quad_sums, launched) and 8-block
# A-scale boxes (sa_box_blocks=8, not launched). The GPU test suites, compute-sanitizer over the
# attention workload, bench/fp8_ab.py boxes (8-block boxes beside the launched kernels), then the
# standard suite (zk) and the targets' ratios.
#   TILES_COMMIT=<commit> sh bench/device_session29b.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
gpu_tests 150 -n 8 tests/cdna_emu tests/portability tests/hopper tests/test_attention_fused.py tests/test_gemm_fp8.py
WORKLOAD=attention TOOLS="synccheck racecheck" TOOL_TIMEOUT=40 sh bench/device_sanitize.sh
timeout 100 python3 bench/fp8_ab.py boxes 2>&1 | tr -d '\000' | grep -v "bitwise vs launched: {'launched': True}$" | tail -12
RUNS=zk sh bench/device_standard_suite.sh
python3 bench/suite_ratios.py "$OUT"/H200-*zk.json
