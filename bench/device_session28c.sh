#!/bin/sh
# Session 28, fourth call: bench/fp8_ab.py stma with the scales stored transposed (stma_mn, global_mn:
# boxes of contiguous floats along M and N in place of 128 rows of 16 bytes), back to back.
#   TILES_COMMIT=<commit> sh bench/device_session28c.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
timeout 200 python3 bench/fp8_ab.py stma 2>&1 | tail -16
