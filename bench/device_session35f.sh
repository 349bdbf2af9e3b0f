#!/bin/sh
# Session 35, sixth call: the split tail in stream shares (tiles/split.h split_plan; core/split.py
# plan_tail). The split tail's GPU tests, compute-sanitizer synccheck and memcheck over the split workload
# (now with stream shares, empty ones among them), then the launched plan against the tail in parts, in
# shares and unsplit, beside cuDNN (bench/attention_split_tail.py stream).
#   git checkout 6339845 (the option, reverted after this call) and TILES_COMMIT=6339845 sh bench/device_session35f.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
gpu_tests 150 tests/hopper/test_split_tail.py
DEVICE_PYTHONPATH=bench WORKLOAD=split TOOLS="synccheck memcheck" TOOL_TIMEOUT=90 sh bench/device_sanitize.sh
timeout 200 python3 bench/attention_split_tail.py stream 4096 8192 16384 2>&1 | grep -v Warning
