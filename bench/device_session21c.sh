#!/bin/sh
# Session 21, third call: where the D = 64 fused backward's warps stall as launched now (not rotated,
# dS by stmatrix; S = 4k, non-causal, B = 4, H = 32), and the D = 128 forward's (S = 4k, non-causal,
# B = 4, H = 16): ncu source counters, clocks left alone (bench/ncu_hot.sh, bench/ncu_hotspots.py).
#   TILES_COMMIT=<commit> sh bench/device_session21c.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
. bench/ncu_hot.sh
HOT_ROWS=40 NCU_TIMEOUT=150 hot f64 regex:fused bench/profile_attention.py tiles bwd 4 32 4096 64 0
HOT_ROWS=30 NCU_TIMEOUT=120 hot fwd128 regex:attention_fwd bench/profile_attention.py tiles fwd 4 16 4096 128 0
