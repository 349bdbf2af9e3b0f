#!/bin/sh
# A session's closing call: the GPU test suites, compute-sanitizer over one workload (default: the
# fused workload, synccheck / racecheck / memcheck: bench/sanitize_suite.py --only fused, the fused
# backward at both head dims, with tails, GQA and a persistent walk over more programs than SMs), then
# the standard suite once per name in RUN into $OUT/H200-<date><name>.json, and the issue targets'
# ratios from each (bench/suite_ratios.py).
#   TILES_COMMIT=<commit> RUN=<name> sh bench/device_closing.sh
#   TILES_COMMIT=<commit> RUN="x y" WORKLOAD=attention TOOLS="synccheck racecheck" sh bench/device_closing.sh
# TEST_TIMEOUT (seconds, default 170; a fresh machine's first compiles can need 400) bounds the tests;
# 0 leaves them out.
# with <commit> typed in from the checkout that sends the tree (`git rev-parse --short HEAD` there).
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
if [ "${TEST_TIMEOUT:-170}" != 0 ]; then  # TEST_TIMEOUT=0: the tests ran in a call of their own
  timeout "${TEST_TIMEOUT:-170}" python3 -m pytest -q -p no:cacheprovider -n 8 -W ignore tests/cdna_emu tests/portability \
      tests/hopper tests/test_attention_fused.py tests/test_gemm_fp8.py tests/test_errors.py -rfs --tb=short > "$OUT/tests.txt" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | cut -c1-200 | head -20
fi
DEVICE_PYTHONPATH=bench WORKLOAD="${WORKLOAD:-fused}" TOOLS="${TOOLS:-synccheck racecheck memcheck}" \
    TOOL_TIMEOUT="${TOOL_TIMEOUT:-40}" sh bench/device_sanitize.sh
RUNS="${RUN:-a}" sh bench/device_standard_suite.sh
for run in ${RUN:-a}; do python3 bench/suite_ratios.py "$OUT"/H200-*"$run".json; done
