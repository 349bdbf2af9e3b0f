#!/bin/sh
# Session 16, second call: two copies of the one-shot tiles (once_stages=2): the GPU tests (the same bits
# as one copy), then the forward's and dQ's sweep with them against the launched schedule.
#   sh bench/device_session16c.sh   (ran at 854f72a; once_stages was removed after it: no faster, see
#   bench/hopper_notes.md, session 16)
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
gpu_tests 150 tests/hopper/test_attention_schedule.py -k "copies or tree"
timeout 400 python3 bench/hopper_tile_sweep.py --only schedule --kernels fwd,dq --seqs ${SEQS:-512,1024,4096,16384} \
    --variants q2 --dims 64,128 > "$OUT/sweep.txt" 2>&1
python3 bench/sweep_table.py "$OUT/sweep.txt"
