#!/bin/sh
# Session 26, eighth call: the fp8 scales as shared loads from a whole-tile table (the `lds` bound,
# garbage values) beside `l1` (bench/fp8_promote_edits.py table), back to back and in the suite's timing.
#   TILES_COMMIT=<commit> sh bench/device_session26h.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
timeout 200 python3 bench/fp8_promote_edits.py table 2>&1 | tail -12
timeout 200 python3 bench/fp8_promote_edits.py table --suite 2>&1 | tail -12
