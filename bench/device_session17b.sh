#!/bin/sh
# Session 17, second call: wide stores from registers (lowering option wide_stores, ops.h store_wide;
# off until measured). The GPU test (the same bits for 0, 2 and 4 pairs a store, aligned and not),
# then the forward's and dK/dV's sweep against the launched kernels: 2 pairs a store (wd2), 4 (wd4)
# and, for the forward, 4 with whole tiles untested (wd4ws; dK/dV has whole_tile_stores on already).
#   sh bench/device_session17b.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
gpu_tests 120 tests/hopper/test_attention_schedule.py -k "wide_stores_give"
timeout 400 python3 bench/hopper_tile_sweep.py --only schedule --kernels fwd,dkdv --seqs ${SEQS:-512,1024,4096,16384} \
    --variants wd2,wd4,wd4ws --dims 64,128 > "$OUT/sweep.txt" 2>&1
python3 bench/sweep_table.py "$OUT/sweep.txt"
