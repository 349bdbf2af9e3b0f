#!/bin/sh
# Session 16, fourth call: the fused backward's schedule options together (the warpgroup index through a
# shuffle, without the prefetch, with rotation or turns, a 2-stage ring, one dS copy) against the split
# backward, D = 128, through autograd.
#   sh bench/device_session16e.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
FUSED_MODES=${FUSED_MODES:-fused,fused_uni,fused_uni_nopf,fused_uni_rot_nopf,fused_uni_pprot_nopf,fused_uni_pp_nopf,fused_uni_nopf_s2,fused_uni_ds1_nopf} \
  timeout 300 python3 bench/hopper_tile_sweep.py --only fused --seqs 1024,4096,16384 > "$OUT/fused.txt" 2>&1
python3 bench/fused_table.py "$OUT/fused.txt" || tail -5 "$OUT/fused.txt"
