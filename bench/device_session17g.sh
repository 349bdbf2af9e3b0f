#!/bin/sh
# (Run in session 17; the option it measured was removed after, measured neutral: bench/hopper_notes.md.)
# Session 17, seventh call: the producer's waits for released stages with a sleep limit (option
# idle_wait, tma.h wait_idle; off until measured). The sixth call's ncu counts showed the attention
# producer re-testing its barrier millions of times (the system's limit is short), in issue slots its
# scheduler shares with consumer warps. Attention's three kernels against the launched ones with 20 µs
# and 1 ms limits, then the two GEMMs the same way (bench/epilogue_ab.py ... idle).
#   TILES_COMMIT=<the sending checkout's commit> sh bench/device_session17g.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
timeout 240 python3 bench/hopper_tile_sweep.py --only schedule --kernels fwd,dq,dkdv --seqs 512,4096,16384 \
    --variants iw20us,iw1ms --dims 64,128 > "$OUT/sweep.txt" 2>&1
python3 bench/sweep_table.py "$OUT/sweep.txt"
timeout 150 python3 bench/epilogue_ab.py bf16,fp8 idle > "$OUT/idle.txt" 2>&1
cut -c1-400 "$OUT/idle.txt"
