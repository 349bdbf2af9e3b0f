#!/bin/sh
# Session 19: the fused backward at D = 64, dQ as each consumer warpgroup's share of the sum over its
# own keys (split_k, added by the reducer warp's TMA reduces). The portability suite's fused backward
# (float64 rule, D = 64 and 128, tails, GQA) and compute-sanitizer racecheck on it, then the backward
# through autograd, split against fused forms (bench/hopper_tile_sweep.py --only fused, FUSED_D=64).
# Ran at e9c6c02 and hung (the tests did not finish in 150 s, the sweep printed nothing before the
# call's 420 s limit); the option was taken out again (bench/hopper_notes.md, session 19). Check that
# commit out to run it again.
#   TILES_COMMIT=e9c6c02 sh bench/device_session19h.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
gpu_tests 150 tests/portability/test_attention.py -k "backward_fused" tests/test_attention_fused.py
FUSED_D=64 timeout 300 python3 bench/hopper_tile_sweep.py --only fused --seqs 1024,4096,16384 > "$OUT/fused.txt" 2>&1
python3 bench/fused_summary.py "$OUT/fused.txt"
grep -iE "error|Traceback" "$OUT/fused.txt" | head -5
