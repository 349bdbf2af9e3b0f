#!/bin/sh
# Session 20, third call: the fused backward at D = 64 with its dS barrier the warpgroup's own (each
# warpgroup reads back only the rows of dS it wrote). The fused tests, the sweep's persistent forms
# (prefetch, dS copies, turns, peel, rotation; FUSED_D=64) and fused_bounds.py again (with the
# persistent walk's dQ taken out).
#   TILES_COMMIT=<commit> sh bench/device_session20c.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
gpu_tests 120 tests/portability/test_attention.py tests/test_attention_fused.py tests/hopper/test_attention_schedule.py -k "fused"
FUSED_D=64 timeout 240 python3 bench/hopper_tile_sweep.py --only fused --seqs 1024,4096,16384 > "$OUT/fused.txt" 2>&1
python3 bench/fused_summary.py "$OUT/fused.txt"
grep -iE "error|Traceback" "$OUT/fused.txt" | head -5
timeout 150 python3 bench/fused_bounds.py 2>&1 | grep -vE "^\s*$" | tail -8
