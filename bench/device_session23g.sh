#!/bin/sh
# Ran at f0c922d (reverted after it: no faster, see bench/hopper_notes.md, session 23).
# Session 23, seventh call: the fused backward's preparation zeroes dQacc (attention_bwd_prep_fused,
# one launch fewer). The attention and SIMT GPU tests, memcheck over the fused workload, kernel times
# around the backward, and the standard suite twice.
#   TILES_COMMIT=<commit> RUNS="x y" sh bench/device_session23g.sh
DEVICE_PYTHONPATH=tests/hopper:tests/portability:bench
. bench/device_env.sh
gpu_tests 170 -n 8 tests/portability/test_attention.py tests/test_attention_fused.py tests/hopper/test_attention_schedule.py \
    tests/hopper/test_simt.py
DEVICE_PYTHONPATH=bench WORKLOAD=fused TOOLS="memcheck" TOOL_TIMEOUT=45 sh bench/device_sanitize.sh
for shape in "16 32 1024 64 0" "4 32 4096 64 0"; do
  echo "== tiles bwd $shape"
  timeout 40 python3 bench/profile_attention.py tiles bwd $shape --table 2>&1 | grep "ms a step" | head -6
done
sh bench/device_standard_suite.sh
python3 bench/suite_ratios.py "$OUT"/H200-*.json | grep -E "geomean|S4096 D128:|S8192 D128:|S16384 D128:"
