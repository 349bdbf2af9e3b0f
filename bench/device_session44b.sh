#!/bin/sh
# Session 44's second call: option kv_rings' GPU tests; kv_rings with the launched options
# (bench/attention_kv_rings.py kvL, kvL192: the split tail, ring_store up to 4k queries) beside the plain
# and 192-key kernels. (What the
# session's device time left room for; the ragged decode timing and the sanitizer over the kv workload wait
# for the next session.)
#   sh bench/device_session44b.sh
DEVICE_PYTHONPATH=bench:tests/hopper:tests/portability
. bench/device_env.sh
gpu_tests 80 tests/hopper/test_kv_rings.py
timeout 120 python3 bench/attention_kv_rings.py 4096 8192 16384 kv192 kvL kvL192 2>&1 | grep -v -i warning
