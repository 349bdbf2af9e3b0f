#!/bin/sh
# Session 21, fourth call: the fused backward with one proxy fence a block (`merge_fences`: dQ's
# staging tile fenced by the next block's dS fence and handed to the reducer there; the third call's
# profile put 9 % of the D = 64 kernel's samples on the staging fence and its hand-over), through
# autograd against the launched form and the split backward, D = 64 (S = 512 to 16k) and D = 128.
#   TILES_COMMIT=<commit> sh bench/device_session21d.sh
# (Ran at 71b06b6. merge_fences was slower at 12 of 14 D = 64 rows and was taken out after it.)
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
FUSED_D=64 FUSED_MODES=fused,fused_mf timeout 120 python3 bench/hopper_tile_sweep.py --only fused \
    --seqs 512,1024,4096,16384 > "$OUT/fused64.txt" 2>&1
python3 bench/fused_summary.py "$OUT/fused64.txt"
FUSED_D=64 FUSED_MODES=fused,fused_mf timeout 120 python3 bench/hopper_tile_sweep.py --only fused \
    --seqs 1024,4096,16384 > "$OUT/fused64b.txt" 2>&1
python3 bench/fused_summary.py "$OUT/fused64b.txt"
FUSED_D=128 FUSED_MODES=fused,fused_mf timeout 100 python3 bench/hopper_tile_sweep.py --only fused \
    --seqs 1024,4096,16384 > "$OUT/fused128.txt" 2>&1
python3 bench/fused_summary.py "$OUT/fused128.txt"
grep -ihE "error|Traceback" "$OUT"/fused64.txt "$OUT"/fused64b.txt "$OUT"/fused128.txt | head -5
