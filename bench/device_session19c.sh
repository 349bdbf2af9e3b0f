#!/bin/sh
# Session 19, third call: the fp8 GEMM's promotion FFMAs with their yield and reuse bits rewritten in
# the cubin (bench/ffma_bits.py), bitwise checked against the launched kernel, then timed back to back
# and in the suite's timing.
#   TILES_COMMIT=<commit> sh bench/device_session19c.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
timeout 200 python3 bench/ffma_bits.py 2>&1 | tee "$OUT/ffma_bits_b2b.txt"
timeout 200 python3 bench/ffma_bits.py --suite 2>&1 | tr '\000' ' ' | tee "$OUT/ffma_bits_suite.txt"
