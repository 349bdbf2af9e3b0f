#!/bin/sh
# Session 15, seventh call: the sixth call's leads again at other lengths (a 3-stage ring for dQ and
# dK/dV at long S; the shuffled warpgroup index for dK/dV at D = 64).
#   sh bench/device_session15g.sh
. bench/device_env.sh
timeout 420 python3 bench/hopper_tile_sweep.py --only schedule --kernels dq,dkdv --seqs ${SEQS:-2048,8192,16384} \
    --variants ${VARIANTS:-s3,uniform} --dims ${DIMS:-64,128} > "$OUT/sweep.txt" 2>&1
python3 bench/sweep_table.py "$OUT/sweep.txt"
