#!/bin/sh
# Session 23, sixth call: is the D = 64 fused kernel's reducer warp on its critical path? The kernel
# alone with the reduce taken out (noreduce, wrong dQ) and with the reducer slowed by 600 ns a block
# (slowred), against the kernel as it is (persist; fused_bounds, vec_tma off in all three).
#   TILES_COMMIT=<commit> sh bench/device_session23f.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
FB_CASES=0:4096,0:16384,1:4096 BOUNDS=persist,persist_noreduce,persist_slowred \
    timeout 300 python3 bench/fused_bounds.py 2>&1 | tail -3
