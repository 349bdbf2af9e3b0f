#!/bin/sh
# Session 16, last call: where the weakest kernels stall, instruction by instruction, for the next
# session (ncu SourceCounters, bench/ncu_hotspots.py): dK/dV and dQ at D = 64, S = 4k (the backward's
# largest gap to cuDNN), and the fp8 GEMM at 1024 x 1536 x 7168 (0.87x row-wise _scaled_mm) with
# _scaled_mm beside it.
#   sh bench/device_session16i.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
hot() {  # name, kernel regex, script, then its arguments
  name=$1; k=$2; script=$3; shift 3
  python3 "$script" "$@" >/dev/null 2>&1  # compile outside the profiler
  timeout 120 ncu --clock-control none -o "$OUT/$name" -f --section SourceCounters --section WarpStateStats -k "$k" \
    --launch-skip 3 --launch-count 1 python3 "$script" "$@" > "$OUT/ncu_$name.log" 2>&1
  ncu -i "$OUT/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/$name.csv" 2> "$OUT/$name.err"
  echo "== $name: $*"
  grep -E "Duration|Warp Cycles Per Issued" "$OUT/ncu_$name.log" | head -2
  python3 bench/ncu_hotspots.py "$OUT/$name.csv" 14 2>&1 | cut -c1-170 || head -c 400 "$OUT/$name.err"
  rm -f "$OUT/$name.ncu-rep"
}
hot dkdv64 "regex:dkdv" bench/profile_attention.py tiles bwd 4 32 4096 64 0
hot dq64 "regex:bwd_dq" bench/profile_attention.py tiles bwd 4 32 4096 64 0
hot fp8_small "regex:gemm_fp8" bench/profile_fp8.py tiles 1024 1536 7168
hot fp8_small_rowwise "regex:gemm|sm90|cutlass" bench/profile_fp8.py scaled_mm 1024 1536 7168
