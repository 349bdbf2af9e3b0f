#!/bin/sh
# Session 44's second call: option kv_rings' GPU tests; kv_rings with the launched options
# (bench/attention_kv_rings.py kvL, kvL192: the split tail, ring_store up to 4k queries) beside the plain
# and 192-key kernels; compute-sanitizer synccheck and racecheck over the kv_rings workload. (What the
# session's device time left room for; the ragged decode timing waits for the next session.)
#   sh bench/device_session44b.sh
DEVICE_PYTHONPATH=bench:tests/hopper:tests/portability
. bench/device_env.sh
gpu_tests 100 tests/hopper/test_kv_rings.py
timeout 150 python3 bench/attention_kv_rings.py 4096 8192 16384 plain kv192 kvL kvL192 2>&1 | grep -v -i warning
DEVICE_PYTHONPATH=bench WORKLOAD=kv TOOLS="synccheck racecheck" TOOL_TIMEOUT=45 sh bench/device_sanitize.sh
