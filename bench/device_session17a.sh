#!/bin/sh
# Prepared in session 16, run in session 17 (first call; bench/hopper_notes.md, session 17), and the
# option it measured removed after, so it no longer runs as it stands: dK/dV's LSE and Delta in fragment
# order (lowering option frag_col_vectors, off until measured; no shuffle per broadcast, no prefetch:
# its second copies would spill). Its GPU test (the same bits), then dK/dV's sweep: the launched
# kernel, without the prefetch alone (nopf), and in fragment order (fragcv). If fragcv beats the
# launched kernel at most shapes and loses at none by more than noise, turn it on in SCHEDULES for
# that head dim (with "prefetch": False) and rerun the standard suite's attention_bwd rows.
#   sh bench/device_session17a.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
gpu_tests 100 tests/hopper/test_attention_schedule.py -k fragment
timeout 240 python3 bench/hopper_tile_sweep.py --only schedule --kernels dkdv --seqs ${SEQS:-512,2048,16384} \
    --variants nopf,fragcv --dims 64,128 > "$OUT/sweep.txt" 2>&1
python3 bench/sweep_table.py "$OUT/sweep.txt"
