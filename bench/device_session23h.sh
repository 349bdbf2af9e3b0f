#!/bin/sh
# Session 23, eighth call: the D = 64 fused kernel with dQ added from registers (option reduce_tma
# off: REDG.E.ADD.F32x2 a pair, no staging tile, no reducer warp) against it as launched, the kernel
# alone with its dQ checked against the split kernels' (fused_bounds persist_redv2).
#   TILES_COMMIT=<commit> sh bench/device_session23h.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
FB_CASES=0:4096,1:4096,0:1024 BOUNDS=persist,persist_redv2 timeout 120 python3 bench/fused_bounds.py 2>&1 | tail -3
