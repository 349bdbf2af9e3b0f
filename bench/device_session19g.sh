#!/bin/sh
# Session 19: the forward's exponentials against the running maximum (lowering option lazy_max). Its
# GPU tests (float64 bound, with keys whose scores jump so that later blocks are redone), then the
# forward's sweep against the launched kernel (D = 64 and 128, causal and not, S = 512-16k).
# Ran at d186aef, the commit that had the option (measured slower and removed; bench/hopper_notes.md,
# session 19): check that commit out to run it again.
#   TILES_COMMIT=d186aef sh bench/device_session19g.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
gpu_tests 150 tests/hopper/test_attention_schedule.py -k "lazy"
timeout 300 python3 bench/hopper_tile_sweep.py --only schedule --kernels fwd --seqs ${SEQS:-512,1024,4096,16384} \
    --variants lazy,lazytma --dims 128,64 > "$OUT/sweep.txt" 2>&1
python3 bench/sweep_table.py "$OUT/sweep.txt"
grep -i "error" "$OUT/sweep.txt" | head -5
