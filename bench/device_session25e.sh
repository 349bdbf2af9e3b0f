#!/bin/sh
# Session 25, sixth call: peel for the D = 128 dQ kernel, non-causal (causal it meets the TMA store's
# C7519, as the forward does; dK/dV at D = 128 peeled serializes, C7512: both read from the CPU build).
#   TILES_COMMIT=<commit> sh bench/device_session25e.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
AB_OPTION=peel AB_JOBS=dq:128 AB_CASES=0:1024,0:4096,0:16384 timeout 300 python3 bench/option_ab.py 2>&1 | tail -8
