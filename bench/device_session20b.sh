#!/bin/sh
# Session 20, second call: where the fused backward at D = 64 loses to the split one (0.76-0.94x in
# the first call's sweep): bench/fused_bounds.py (the dQ reduce out, dQ out, the query walk shifted per
# key block), beside the split kernels, the dK/dV kernel alone and cuDNN.
#   TILES_COMMIT=<commit> sh bench/device_session20b.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
timeout 400 python3 bench/fused_bounds.py 2>&1 | grep -vE "^\s*$" | tail -20
