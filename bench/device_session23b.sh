#!/bin/sh
# Ran at a9c1e28 (reverted after this session's measurements: see bench/hopper_notes.md, session 23).
# Session 23, second call: the fused backward's dQ written by each query block's last adder (no
# conversion pass). The attention GPU tests (with the bitwise last-adder test), compute-sanitizer over
# the fused workload, the kernel times around the backward again, and the standard suite once.
#   TILES_COMMIT=<commit> RUNS="v" sh bench/device_session23b.sh
DEVICE_PYTHONPATH=tests/hopper:tests/portability:bench
. bench/device_env.sh
gpu_tests 170 -n 8 tests/portability/test_attention.py tests/test_attention_fused.py tests/hopper/test_attention_schedule.py
DEVICE_PYTHONPATH=bench WORKLOAD=fused TOOLS="memcheck synccheck racecheck" TOOL_TIMEOUT=45 sh bench/device_sanitize.sh
for shape in "16 32 1024 64 0" "4 32 4096 64 0" "4 32 4096 64 1" "2 16 8192 128 0"; do
  echo "== tiles bwd $shape"
  timeout 40 python3 bench/profile_attention.py tiles bwd $shape --table 2>&1 | grep "ms a step"
done
sh bench/device_standard_suite.sh
python3 bench/suite_ratios.py "$OUT"/H200-*.json | grep -E "geomean|S >= 4k|8192"
