#!/bin/sh
# Session 34's first three calls: bench/attention_phase.py, the D = 128 forward with its warpgroups half
# a key cycle apart (float64 check, then timed beside launched and cuDNN at the shapes its main() lists).
#   TILES_COMMIT=<commit> sh bench/device_session34a.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
timeout 300 python3 bench/attention_phase.py 2>&1 | tr -d '\000' | grep -v Warning
