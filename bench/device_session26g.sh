#!/bin/sh
# Session 26, seventh call: each fp8 scale load also prefetching into L1 its row's line 8 or 16 K blocks
# on (bench/fp8_promote_edits.py prefetch), beside the l1 bound, back to back and in the suite's timing.
#   TILES_COMMIT=<commit> sh bench/device_session26g.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
timeout 200 python3 bench/fp8_promote_edits.py prefetch 2>&1 | tail -12
timeout 200 python3 bench/fp8_promote_edits.py prefetch --suite 2>&1 | tail -12
