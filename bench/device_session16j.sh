#!/bin/sh
# Session 16, tenth call: the rotated loop's first iteration peeled (option peel: no empty wgmma group
# for ptxas to close in the loop): the GPU tests (the same bits), then the forward, dQ and dK/dV at
# D = 64 with it against the launched kernels.
#   sh bench/device_session16j.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
gpu_tests 100 tests/hopper/test_attention_schedule.py -k peel
timeout 200 python3 bench/hopper_tile_sweep.py --only schedule --kernels fwd,dq,dkdv --seqs ${SEQS:-512,2048,16384} \
    --variants peel --dims 64,128 > "$OUT/sweep.txt" 2>&1
python3 bench/sweep_table.py "$OUT/sweep.txt"
