#!/bin/sh
# Session 19, fourth call: 16-bit attention outputs through a staging tile and a TMA store (lowering
# option tma_store; off until measured). The GPU test (the same bits as the pair stores, with row tails
# and grouped heads), then the forward's and dQ's sweep against the launched kernels.
#   TILES_COMMIT=<commit> sh bench/device_session19d.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
gpu_tests 120 tests/hopper/test_attention_schedule.py -k "tma_store or wide_stores_give"
timeout 400 python3 bench/hopper_tile_sweep.py --only schedule --kernels fwd,dq --seqs ${SEQS:-512,1024,4096,16384} \
    --variants tma --dims 64,128 > "$OUT/sweep.txt" 2>&1
python3 bench/sweep_table.py "$OUT/sweep.txt"
grep -i "error" "$OUT/sweep.txt" | head -5
