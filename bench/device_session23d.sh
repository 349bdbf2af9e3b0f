#!/bin/sh
# Ran at ea7e846 (reverted after this session's measurements: see bench/hopper_notes.md, session 23).
# Session 23, fourth call: the last adder's dQ through a shared buffer a block later (finish_buf), at
# D = 64. The attention GPU tests, the kernel alone against session 22's form (fused_bounds:
# persist_noarrive), kernel times around the backward, and the standard suite once.
#   TILES_COMMIT=<commit> RUNS="w" sh bench/device_session23d.sh
DEVICE_PYTHONPATH=tests/hopper:tests/portability:bench
. bench/device_env.sh
gpu_tests 170 -n 8 tests/portability/test_attention.py tests/test_attention_fused.py tests/hopper/test_attention_schedule.py
FB_CASES=0:4096,1:4096,0:16384 BOUNDS=persist,persist_waitonly,persist_noarrive \
    timeout 200 python3 bench/fused_bounds.py 2>&1 | tail -3
for shape in "16 32 1024 64 0" "4 32 4096 64 0" "4 32 4096 64 1"; do
  echo "== tiles bwd $shape"
  timeout 40 python3 bench/profile_attention.py tiles bwd $shape --table 2>&1 | grep "ms a step" | head -5
done
sh bench/device_standard_suite.sh
python3 bench/suite_ratios.py "$OUT"/H200-*.json | grep -E "geomean"
python3 bench/suite_ratios.py "$OUT"/H200-*.json | grep -E "attention_bwd" | head -30
