#!/bin/sh
# Session 16, fifth call: where the warps stall, instruction by instruction (ncu SourceCounters, the
# source page as SASS): the forward at S = 512, D = 128 (tiles 0.82x cuDNN there), and the fused
# backward at S = 4k, D = 128 with the warpgroup index through a shuffle (about the split backward's
# speed: is it the barrier between the two consumer warpgroups?).
#   sh bench/device_session16f.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
hot() {  # name, kernel regex, then profile_attention.py's arguments
  name=$1; k=$2; shift 2
  python3 bench/profile_attention.py "$@" >/dev/null 2>&1  # compile outside the profiler
  timeout 150 ncu --clock-control none -o "$OUT/$name" -f --section SourceCounters --section WarpStateStats -k "$k" \
    --launch-skip 3 --launch-count 1 python3 bench/profile_attention.py "$@" > "$OUT/ncu_$name.log" 2>&1
  ncu -i "$OUT/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/$name.csv" 2> "$OUT/$name.err"
  echo "== $name: $*"
  python3 bench/ncu_hotspots.py "$OUT/$name.csv" 30 2>&1 | cut -c1-190 || { head -c 600 "$OUT/$name.csv"; cat "$OUT/$name.err" | head -5; }
  rm -f "$OUT/$name.ncu-rep"
}
hot fwd512 "regex:attention" tiles fwd 32 16 512 128 0
FUSED_OPTIONS=uniform_warpgroup hot fused4k "regex:fused" tiles bwd 4 16 4096 128 0 --fused
