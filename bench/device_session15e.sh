#!/bin/sh
# Session 15, fifth call: the forward's rescale of O skipped where no row maximum moved (option
# skip_rescale, on): the attention GPU tests (bitwise against the unskipped kernel, float64), then the
# schedule sweep of the forward with it off against on.
#   SEQS=512,1024,4096,16384 DIMS=64,128 sh bench/device_session15e.sh
# Ran at commit f9c9c81; the option skip_rescale was removed after it measured slower (bench/hopper_notes.md,
# session 15): check that commit out to run this again.
DEVICE_PYTHONPATH=tests/hopper
. bench/device_env.sh
gpu_tests 200 -n 8 tests/hopper/test_attention_schedule.py tests/portability/test_attention.py -k "hopper or schedule or rescale"
VARIANTS=${VARIANTS:-norescale} SEQS=${SEQS:-512,1024,4096,16384} DIMS=${DIMS:-64,128} 
timeout 330 python3 bench/hopper_tile_sweep.py --only schedule --seqs $SEQS --variants $VARIANTS --dims $DIMS > "$OUT/sweep.txt" 2>&1
tail -3 "$OUT/sweep.txt" | cut -c1-300
python3 bench/sweep_table.py "$OUT/sweep.txt"
