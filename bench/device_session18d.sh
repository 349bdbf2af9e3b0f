#!/bin/sh
# Session 18, fourth call: the bf16 GEMM as now launched (128 x 256 tiles: group 16, the deferred
# store) against the form before (plain), timed as the suite times; the fp8 GEMM's tile order
# (group 4 / 12 / 16 / 24 against the launched 8) timed the same way; the GEMM tests on the GPU.
#   sh bench/device_session18d.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
gpu_tests 150 tests/hopper/test_layout_probe.py tests/hopper/test_lower.py tests/portability/test_gemm_norm_rotary.py
timeout 200 python3 bench/deferred_store_ab.py --suite --variants plain 2>&1 | tee "$OUT/ab_suite.txt"
timeout 200 python3 bench/fp8_ab.py groups --suite 2>&1 | tee "$OUT/fp8_groups.txt"
