#!/bin/sh
# Session 15, fourth call: the exp2 split (lowering option exp2_fma) on the H200: its GPU tests (the probe
# against float64, attention by the TESTING.md rule), then the schedule sweep of the forward, dQ and
# dK/dV kernels with n of 8 pairs' exponentials on the FMA pipes against none.
#   VARIANTS=x1,x2,x3,x4 SEQS=512,4096,16384 DIMS=64,128 sh bench/device_session15d.sh
# Ran at commit 567ada2; the option exp2_fma was removed after it measured slower (bench/hopper_notes.md,
# session 15): check that commit out to run this again.
DEVICE_PYTHONPATH=tests/hopper
. bench/device_env.sh
gpu_tests 200 tests/hopper/test_exp2_fma.py
timeout 330 python3 bench/hopper_tile_sweep.py --only schedule --seqs ${SEQS:-512,4096,16384} \
    --variants ${VARIANTS:-x1,x2,x3,x4} --dims ${DIMS:-64,128} > "$OUT/sweep.txt" 2>&1
python3 bench/sweep_table.py "$OUT/sweep.txt"
