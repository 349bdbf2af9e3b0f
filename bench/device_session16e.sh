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
grep -E "^\{" "$OUT/fused.txt" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    b = r['ms']['split']
    print(r['causal'], r['S'], r['H'], r['Hkv'], 'split %.3f ms' % b, {n[6:]: round(b / t, 3) for n, t in r['ms'].items() if n != 'split'},
          [n for n, ok in r['ok'].items() if not ok] or 'all ok')
" || tail -5 "$OUT/fused.txt"
