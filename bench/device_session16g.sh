#!/bin/sh
# Session 16, sixth call: stores of whole tiles without a test a pair (ops.h; ncu put a fifth of the
# S = 512, D = 128 forward in the tested epilogue): the portability suite's attention tests (tails take
# the tested path, whole tiles the new one), then the forward, dQ and dK/dV with every pair tested
# against the launched kernels.
#   sh bench/device_session16g.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
gpu_tests 200 tests/portability/test_attention.py -k hopper
timeout 300 python3 bench/hopper_tile_sweep.py --only schedule --kernels fwd,dq,dkdv --seqs ${SEQS:-512,1024,4096,16384} \
    --variants tested --dims 64,128 > "$OUT/sweep.txt" 2>&1
python3 bench/sweep_table.py "$OUT/sweep.txt"
