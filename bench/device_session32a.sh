#!/bin/sh
# Session 32, first call: option split_tail on the H200. Its GPU tests, compute-sanitizer over the split
# workload, then bench/attention_split_tail.py (the suite's timing, beside cuDNN).
#   TILES_COMMIT=<commit> sh bench/device_session32a.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
timeout 120 python3 -m pytest -q -p no:cacheprovider -W ignore tests/hopper/test_split_tail.py tests/test_split.py \
    -rfs --tb=short 2>&1 | tail -15
WORKLOAD=split TOOLS="memcheck racecheck synccheck" TOOL_TIMEOUT=60 sh bench/device_sanitize.sh
timeout 300 python3 bench/attention_split_tail.py 2>&1 | tr -d '\000' | grep -v Warning
