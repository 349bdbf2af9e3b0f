#!/bin/sh
# Session 23, first call: where the backward's time goes around its kernels. Kernel times a step
# (torch.profiler) for tiles and SDPA's cuDNN backend at the backward rows still short of 1.0.
#   TILES_COMMIT=<commit> sh bench/device_session23a.sh
. bench/device_env.sh
for shape in "16 32 1024 64 0" "4 32 4096 64 0" "1 32 16384 64 0" "4 32 4096 64 1" "4 16 4096 128 0" "8 16 2048 128 0" "2 16 8192 128 0"; do
  for impl in tiles cudnn; do
    echo "== $impl bwd $shape"
    timeout 60 python3 bench/profile_attention.py $impl bwd $shape --table 2>&1 | tail -8
  done
done
