#!/bin/sh
# Session 27, first call: the fp8 scales by TMA into the ring stages (option scales_tma): its GPU tests
# (bitwise against the global loads, float64 bound, both layouts), then bench/fp8_ab.py stma back to back
# and in the suite's timing.
#   TILES_COMMIT=<commit> sh bench/device_session27a.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
gpu_tests 200 tests/hopper/test_fp8_scales_tma.py tests/hopper/test_fp8_scales.py -x
timeout 150 python3 bench/fp8_ab.py stma 2>&1 | tail -16
timeout 150 python3 bench/fp8_ab.py stma --suite 2>&1 | tail -16
