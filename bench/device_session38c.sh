#!/bin/sh
# Session 38, third call: ring_store with the split tail (whole tiles through the kept stage, parts
# into the workspace). Its GPU tests, compute-sanitizer over the split workload with it, then
# bench/attention_clock.py ab at S = 4k / 8k / 16k: the launched split tail against split_ring (and at
# 4k the unsplit forward with and without ring_store), time, clock and cycles, beside cuDNN.
#   sh bench/device_session38c.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
gpu_tests 200 tests/hopper/test_ring_store.py tests/hopper/test_split_tail.py
for tool in racecheck synccheck memcheck; do
  timeout 120 compute-sanitizer --tool $tool --report-api-errors no --kernel-name kns=tiles_ python3 bench/sanitize_suite.py --only ring 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|sanitize_suite|Error" | head -5
done
timeout 300 python3 bench/attention_clock.py ab 4096 8192 16384 2>&1 | grep -v Warning
