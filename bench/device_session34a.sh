#!/bin/sh
# Prepared in session 33 for the next session's first call: bench/attention_phase.py, the D = 128
# forward with its warpgroups half a key cycle apart (float64 check, then timed beside launched and
# cuDNN at B = 1, H = 132, S = 4k / 8k).
#   TILES_COMMIT=<commit> sh bench/device_session34a.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
timeout 300 python3 bench/attention_phase.py 2>&1 | tr -d '\000' | grep -v Warning
