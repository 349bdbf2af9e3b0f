#!/bin/sh
# Session 15, sixth call: the backward kernels' schedule choices again, on today's code (turns, the fold,
# the shuffled warpgroup index, ring depth), each against what SCHEDULES launches.
#   sh bench/device_session15f.sh
. bench/device_env.sh
timeout 420 python3 bench/hopper_tile_sweep.py --only schedule --kernels dq,dkdv --seqs ${SEQS:-512,4096,16384} \
    --variants ${VARIANTS:-pp,nopp,fold,uniform,s2,s3} --dims ${DIMS:-64,128} > "$OUT/sweep.txt" 2>&1
tail -2 "$OUT/sweep.txt" | cut -c1-300
python3 bench/sweep_table.py "$OUT/sweep.txt"
