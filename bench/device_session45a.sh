#!/bin/sh
# The next session's first call (prepared in session 44): the GPU tests of session 44's changes (option
# kv_rings; counts and tables on the CPU with no synchronization; stopped windows in SIMT kernels),
# compute-sanitizer synccheck and
# racecheck over the kv_rings and decode workloads, then the ragged decode timing with its CUDA-graph and
# counts-on-the-host rows. bench/device_session45b.sh is the second call.
#   sh bench/device_session45a.sh
DEVICE_PYTHONPATH=bench:tests/hopper:tests/portability
. bench/device_env.sh
gpu_tests 150 -n 4 tests/hopper/test_kv_rings.py tests/hopper/test_split_tail.py tests/test_stopped_windows.py \
    tests/portability/test_attention.py tests/portability/test_attention_varlen.py
for w in kv decode; do
    DEVICE_PYTHONPATH=bench WORKLOAD=$w TOOLS="synccheck racecheck" TOOL_TIMEOUT=45 sh bench/device_sanitize.sh
done
timeout 120 python3 bench/attention_decode.py --ragged 2>&1 | grep -a -v -i "warning\|scaled_dot_product_attention(" | tr -cd '\11\12\15\40-\176'
