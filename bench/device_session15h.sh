#!/bin/sh
# Prepared in session 15 (not run: no device time left): ncu on the backward's dK/dV kernel at D = 64
# and 128 (S = 4k, non-causal), the kernel that runs at 460 / 670 TFLOP/s a GEMM: where its warps stall.
#   sh bench/device_session15h.sh
. bench/device_env.sh
for d in 64 128; do
  h=$((2048 / d))
  python3 bench/profile_attention.py tiles bwd 4 $h 4096 $d 0  # compile outside the profiler
  timeout 80 ncu --clock-control none --target-processes all -k "regex:dkdv" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats \
    --metrics "smsp__inst_executed.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,sm__cycles_elapsed.avg.per_second" \
    python3 bench/profile_attention.py tiles bwd 4 $h 4096 $d 0 > "$OUT/ncu_dkdv_$d.txt" 2>&1
  echo "== ncu dK/dV D=$d"
  grep -E "^  [a-zA-Z_].*\(|Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|Warp Cycles Per Issued|inst_executed.sum|wavefronts" "$OUT/ncu_dkdv_$d.txt" | cut -c1-150 | head -10
  grep -E "^    smsp__average_warps" "$OUT/ncu_dkdv_$d.txt" | awk '$NF+0 >= 0.1' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | head -12
done
