#!/bin/sh
# Session 16, seventh call: the fused backward's dQ one block late (defer_reduce: its mma under the next
# block's softmax, one barrier a block before it): compute-sanitizer over it, then the fused backward
# with it against the split one (outputs compared with the split path's), and dK/dV with dP's mma
# before dV's (dp_first).
#   sh bench/device_session16h.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
FUSED_OPTIONS=defer_reduce WORKLOAD=fused TOOLS="racecheck synccheck memcheck" TOOL_TIMEOUT=100 sh bench/device_sanitize.sh
FUSED_MODES=${FUSED_MODES:-fused,fused_defer,fused_defer_nopf,fused_defer_tested} \
  timeout 240 python3 bench/hopper_tile_sweep.py --only fused --seqs 1024,4096,16384 > "$OUT/fused.txt" 2>&1
grep -E "^\{" "$OUT/fused.txt" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    b = r['ms']['split']
    print(r['causal'], r['S'], r['H'], r['Hkv'], 'split %.3f ms' % b, {n[6:]: round(b / t, 3) for n, t in r['ms'].items() if n != 'split'},
          [n for n, ok in r['ok'].items() if not ok] or 'all ok', 'max diff', {n[6:]: ['%.1e' % x for x in d] for n, d in r['max_diff'].items() if 'defer' in n})
" || tail -5 "$OUT/fused.txt"
timeout 150 python3 bench/hopper_tile_sweep.py --only schedule --kernels dkdv --seqs 1024,4096,16384 \
    --variants dpf --dims 64,128 > "$OUT/sweep.txt" 2>&1
python3 bench/sweep_table.py "$OUT/sweep.txt"
