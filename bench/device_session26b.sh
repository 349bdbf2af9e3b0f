#!/bin/sh
# Session 26, second call: the fp8 scales through a per-warp ring in shared memory filled by the
# consumers' own cp.async copies (option scale_ring), beside the l1 and imm bounds; back to back and in
# the suite's timing (bench/fp8_promote_edits.py ring).
#   TILES_COMMIT=<commit> sh bench/device_session26b.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
timeout 300 python3 bench/fp8_promote_edits.py ring 2>&1 | tail -12
timeout 200 python3 bench/fp8_promote_edits.py ring --suite 2>&1 | tail -12
