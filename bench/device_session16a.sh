#!/bin/sh
# Prepared in session 15 for the next device session (not yet run): the forward's row maximum as a tree
# (lowering option tree_max, off until measured): its GPU tests (bitwise against the chain, float64),
# then the schedule sweep of the forward with it on against off. If it is faster at most shapes and
# slower at none by more than noise, make it the default (tree_max on in WarpSpecializedLowering) and
# run the standard suite.
#   SEQS=512,1024,4096,16384 DIMS=64,128 sh bench/device_session16a.sh
DEVICE_PYTHONPATH=tests/hopper
. bench/device_env.sh
gpu_tests 200 tests/hopper/test_attention_schedule.py -k tree
timeout 300 python3 bench/hopper_tile_sweep.py --only schedule --kernels fwd --seqs ${SEQS:-512,1024,4096,16384} \
    --variants tree --dims ${DIMS:-64,128} > "$OUT/sweep.txt" 2>&1
python3 bench/sweep_table.py "$OUT/sweep.txt"
