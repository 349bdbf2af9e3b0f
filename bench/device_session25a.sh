#!/bin/sh
# Session 25, first call: the forward's peel launch at D = 128 (e472e3c) through the GPU tests, the
# sanitizers over the attention workload, and two standard-suite runs.
#   TILES_COMMIT=<commit> sh bench/device_session25a.sh
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
timeout 170 python3 -m pytest -q -p no:cacheprovider -n 8 -W ignore tests/cdna_emu tests/portability tests/hopper \
    tests/test_attention_fused.py tests/test_gemm_fp8.py -rfs --tb=short > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | cut -c1-200 | head -20
DEVICE_PYTHONPATH=bench WORKLOAD=attention TOOLS="synccheck racecheck" TOOL_TIMEOUT=45 sh bench/device_sanitize.sh
RUNS="zc zd" sh bench/device_standard_suite.sh
for f in "$OUT"/H200-*zc.json "$OUT"/H200-*zd.json; do PYTHONPATH=. python3 bench/suite_ratios.py "$f"; done
