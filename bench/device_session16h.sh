#!/bin/sh
# Session 16, seventh call: the fused backward's dQ one block late (defer_reduce: its mma under the next
# block's softmax, one barrier a block before it): compute-sanitizer over it, then the fused backward
# with it against the split one (outputs compared with the split path's), and dK/dV with dP's mma
# before dV's (dp_first).
#   sh bench/device_session16h.sh   (ran at 194eac1; defer_reduce and dp_first were removed after it: no
#   faster, see bench/hopper_notes.md, session 16)
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
FUSED_OPTIONS=defer_reduce WORKLOAD=fused TOOLS="racecheck synccheck memcheck" TOOL_TIMEOUT=100 sh bench/device_sanitize.sh
FUSED_MODES=${FUSED_MODES:-fused,fused_defer,fused_defer_nopf,fused_defer_tested} \
  timeout 240 python3 bench/hopper_tile_sweep.py --only fused --seqs 1024,4096,16384 > "$OUT/fused.txt" 2>&1
python3 bench/fused_table.py "$OUT/fused.txt" --diffs || tail -5 "$OUT/fused.txt"
timeout 150 python3 bench/hopper_tile_sweep.py --only schedule --kernels dkdv --seqs 1024,4096,16384 \
    --variants dpf --dims 64,128 > "$OUT/sweep.txt" 2>&1
python3 bench/sweep_table.py "$OUT/sweep.txt"
