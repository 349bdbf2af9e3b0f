#!/bin/sh
# Session 17, sixth call: where the backward's time goes after the wide stores. Kernel times per step
# (torch.profiler, bench/profile_attention.py --table) for tiles and cuDNN at D = 128 and 64, S = 4k,
# non-causal; then ncu source counters (bench/ncu_hotspots.py) on dK/dV and dQ at D = 128 (not
# profiled before), and on the short causal forward at D = 64 (S = 512, the forward's weakest row)
# with cuDNN's forward beside it.
#   TILES_COMMIT=<the sending checkout's commit> sh bench/device_session17f.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
for impl in tiles cudnn; do
  for shape in "4 16 4096 128 0" "4 32 4096 64 0"; do
    echo "== $impl bwd $shape"
    timeout 60 python3 bench/profile_attention.py $impl bwd $shape --table 2>&1 | tail -6 | cut -c1-150
  done
done
hot() {  # name, kernel regex, script, then its arguments
  name=$1; k=$2; script=$3; shift 3
  python3 "$script" "$@" >/dev/null 2>&1  # compile outside the profiler
  timeout 100 ncu --clock-control none -o "$OUT/$name" -f --section SourceCounters --section WarpStateStats -k "$k" \
    --launch-skip 3 --launch-count 1 python3 "$script" "$@" > "$OUT/ncu_$name.log" 2>&1
  ncu -i "$OUT/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/$name.csv" 2> "$OUT/$name.err"
  echo "== $name: $*"
  grep -E "Duration|Warp Cycles Per Issued" "$OUT/ncu_$name.log" | head -2
  python3 bench/ncu_hotspots.py "$OUT/$name.csv" 12 2>&1 | cut -c1-170 || head -c 400 "$OUT/$name.err"
  rm -f "$OUT/$name.ncu-rep"
}
hot dkdv128 "regex:dkdv" bench/profile_attention.py tiles bwd 4 16 4096 128 0
hot dq128 "regex:bwd_dq" bench/profile_attention.py tiles bwd 4 16 4096 128 0
hot fwd64c512 "regex:attention_fwd" bench/profile_attention.py tiles fwd 32 32 512 64 1
hot fwd64c512_cudnn "regex:fprop|fmha|cudnn|sm90" bench/profile_attention.py cudnn fwd 32 32 512 64 1
