#!/bin/sh
# Session 21, sixth call: LSE and Delta through the ring (option vec_ring: warp 2 of the producer
# warpgroup copies each stage's windows with cp.async; the consumers read them from shared memory, so
# no global load of theirs is in flight at the proxy fences, which the fifth call's `noload` bound
# put at 2.6-6.3 % of the D = 64 fused kernel). The fused GPU tests with it on, fused_bounds, and the
# sweep through autograd (S = 512 to 16k).
#   TILES_COMMIT=<commit> sh bench/device_session21f.sh
# (Ran at ae69459. vec_ring was 3-6 % slower in fused_bounds and slower at 5 of 8 sweep rows: taken out.)
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
BOUNDS=persist,persist_vr,persist_noload timeout 100 python3 bench/fused_bounds.py > "$OUT/bounds.txt" 2>&1
cut -c1-600 "$OUT/bounds.txt"
FUSED_D=64 FUSED_MODES=fused,fused_vr timeout 100 python3 bench/hopper_tile_sweep.py --only fused \
    --seqs 512,1024,4096,16384 > "$OUT/fused64.txt" 2>&1
python3 bench/fused_summary.py "$OUT/fused64.txt"
grep -ihE "error|Traceback" "$OUT"/fused64.txt "$OUT"/bounds.txt | head -5
