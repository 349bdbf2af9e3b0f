#!/bin/sh
# Session 21, seventh call: LSE and Delta loaded at their own block, with the next block's lines
# prefetched into L1 (prefetch="l1"): no load of the consumers' is in flight at the proxy fences
# (the fifth call's `noload` bound put those waits at 2.6-6.3 % of the D = 64 fused kernel, and the
# sixth call's producer-warp copies lost 4-5 %). fused_bounds and the sweep through autograd.
#   TILES_COMMIT=<commit> sh bench/device_session21g.sh
# (Ran at c26b512. prefetch="l1" was 15-21 % slower in fused_bounds, about as slow as no prefetch: taken out.)
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
BOUNDS=persist,persist_pfl1,persist_noload timeout 100 python3 bench/fused_bounds.py > "$OUT/bounds.txt" 2>&1
cut -c1-600 "$OUT/bounds.txt"
FUSED_D=64 FUSED_MODES=fused,fused_pfl1 timeout 100 python3 bench/hopper_tile_sweep.py --only fused \
    --seqs 512,1024,4096,16384 > "$OUT/fused64.txt" 2>&1
python3 bench/fused_summary.py "$OUT/fused64.txt"
grep -ihE "error|Traceback" "$OUT"/fused64.txt "$OUT"/bounds.txt | head -5
