#!/bin/sh
# Session 14's closing checks on the H200: the GPU test suites (hopper incl. stream-K, portability incl.
# the fused backward, cdna-emu), then compute-sanitizer over the fp8 GEMM's stream-K paths.
#   sh bench/device_session14_final.sh
# The benchmark follows in its own call: TILES_COMMIT=$(git rev-parse --short HEAD) sh bench/device_session14_bench.sh
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
timeout 270 python3 -m pytest -q -p no:cacheprovider -n 8 -W ignore tests/cdna_emu tests/portability tests/hopper \
    tests/test_attention_fused.py -rfs --tb=short > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | cut -c1-200 | head -30
WORKLOAD=gemm_fp8 TOOL_TIMEOUT=90 sh bench/device_sanitize.sh
