#!/bin/sh
# Session 16, first call: the row maximum as a tree (device_session16a.sh, its tests and the forward's
# sweep), the fused backward against the split one as it stands (hopper_tile_sweep.py --only fused),
# then ncu: the fused backward's dK/dV/dQ kernel at D = 128, S = 4k, and the forward at S = 512, D = 128
# (tiles against cuDNN), where the forward is furthest behind.
#   sh bench/device_session16b.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
gpu_tests 150 tests/hopper/test_attention_schedule.py -k tree
timeout 200 python3 bench/hopper_tile_sweep.py --only schedule --kernels fwd --seqs 512,4096,16384 \
    --variants tree --dims 64,128 > "$OUT/sweep.txt" 2>&1
python3 bench/sweep_table.py "$OUT/sweep.txt"
timeout 150 python3 bench/hopper_tile_sweep.py --only fused --seqs 1024,4096,16384 > "$OUT/fused.txt" 2>&1
grep -E "^\{" "$OUT/fused.txt" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    print(r['causal'], r['S'], r['H'], r['Hkv'], {n: round(t, 3) for n, t in r['ms'].items()}, r['ok'])
" || tail -5 "$OUT/fused.txt"
prof() {  # name, kernel regex, then profile_attention.py's arguments
  name=$1; k=$2; shift 2
  timeout 100 ncu --clock-control none --target-processes all -k "$k" --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats \
    --metrics "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__cycles_elapsed.avg.per_second" \
    python3 bench/profile_attention.py "$@" > "$OUT/ncu_$name.txt" 2>&1
  echo "== ncu $name: $*"
  grep -E "^  [a-zA-Z_].*\(|Duration|SM Frequency|gmma|Warp Cycles Per Issued|inst_executed.sum" "$OUT/ncu_$name.txt" | cut -c1-150 | head -10
  grep -E "^    smsp__average_warps" "$OUT/ncu_$name.txt" | awk '$NF+0 >= 0.1' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | head -12
}
python3 bench/profile_attention.py tiles fwd 32 16 512 128 0
prof fwd512_tiles "regex:attention" tiles fwd 32 16 512 128 0
prof fwd512_cudnn "regex:cudnn|sm90|fmha|flash|xmma" cudnn fwd 32 16 512 128 0
python3 bench/profile_attention.py tiles bwd 4 16 4096 128 0 --fused
prof fused4k "regex:fused" tiles bwd 4 16 4096 128 0 --fused
