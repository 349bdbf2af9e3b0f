#!/bin/sh
# Session 37, third call: option ring_store (the D = 128 forward's O by TMA from the last key block's
# ring stage): its GPU tests, compute-sanitizer over its workload, then its speed against the choice
# before it, causal and not, S = 512 / 1k / 2k / 4k, both timings, beside cuDNN.
#   sh bench/device_session37b.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
gpu_tests 200 tests/hopper/test_ring_store.py
for tool in racecheck synccheck memcheck; do
  timeout 150 compute-sanitizer --tool $tool --report-api-errors no --kernel-name kns=tiles_ python3 bench/sanitize_suite.py --only ring 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|sanitize_suite|Error" | head -5
done
timeout 300 python3 bench/attention_ring_store.py 2>&1 | grep -v Warning
