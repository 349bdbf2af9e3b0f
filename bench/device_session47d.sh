#!/bin/sh
# Session 47, third call: bisect the packed dK / dV kernel's fault over its schedule options
# (bench/varlen_bwd_bisect.py, a process a variant).
. bench/device_env.sh
for v in launched no_vec_tma not_persistent no_rotate reversed stages2 no_whole_stores no_fold; do
  CUDA_LAUNCH_BLOCKING=1 timeout 40 python3 bench/varlen_bwd_bisect.py $v 2>&1 | grep -a "ok\|FAIL" | cut -c1-400 | head -2
done
