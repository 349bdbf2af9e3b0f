#!/bin/sh
# Session 17, sixth call: where the backward's time goes after the wide stores. Kernel times per step
# (torch.profiler, bench/profile_attention.py --table) for tiles and cuDNN at D = 128 and 64, S = 4k,
# non-causal; then ncu source counters (bench/ncu_hotspots.py) on dK/dV and dQ at D = 128 (not
# profiled before), and on the short causal forward at D = 64 (S = 512, the forward's weakest row)
# with cuDNN's forward beside it.
#   TILES_COMMIT=<the sending checkout's commit> sh bench/device_session17f.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
for impl in tiles cudnn; do
  for shape in "4 16 4096 128 0" "4 32 4096 64 0"; do
    echo "== $impl bwd $shape"
    timeout 60 python3 bench/profile_attention.py $impl bwd $shape --table 2>&1 | tail -6 | cut -c1-150
  done
done
HOT_ROWS=12 NCU_TIMEOUT=100
. bench/ncu_hot.sh
hot dkdv128 "regex:dkdv" bench/profile_attention.py tiles bwd 4 16 4096 128 0
hot dq128 "regex:bwd_dq" bench/profile_attention.py tiles bwd 4 16 4096 128 0
hot fwd64c512 "regex:attention_fwd" bench/profile_attention.py tiles fwd 32 32 512 64 1
hot fwd64c512_cudnn "regex:fprop|fmha|cudnn|sm90" bench/profile_attention.py cudnn fwd 32 32 512 64 1
