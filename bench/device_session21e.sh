#!/bin/sh
# Session 21, fifth call: do the D = 64 fused backward's proxy fences wait for the loop's global loads
# of the next block's LSE and Delta? (The third call's profile put 7 % of its samples, long scoreboard,
# on the two fences.) fused_bounds at D = 64: the launched kernel alone against those loads left out
# (`noload`, a bound), issued after the dS barrier (`pfmid`) and not prefetched (`nopf`).
#   TILES_COMMIT=<commit> sh bench/device_session21e.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
BOUNDS=persist,persist_noload,persist_pfmid,persist_nopf timeout 150 python3 bench/fused_bounds.py > "$OUT/bounds.txt" 2>&1
cut -c1-600 "$OUT/bounds.txt"
