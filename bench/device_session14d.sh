#!/bin/sh
# Session 14: ncu on the fp8 GEMM at 8192^3 and 1024 x 1536 x 7168, tiles against torch._scaled_mm row-wise
# (full section text in $OUT, the headline lines printed).
. bench/device_env.sh
python3 bench/profile_fp8.py tiles 8192 8192 8192  # compile outside the profiler
for shape in "8192 8192 8192" "1024 1536 7168"; do
  for impl in tiles scaled_mm; do
    tag=$(echo "$impl $shape" | tr ' ' _)
    if [ $impl = tiles ]; then k="regex:gemm_fp8"; else k="regex:gemm|xmma|cutlass|sm90"; fi
    timeout 120 ncu --clock-control none --target-processes all -k "$k" --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section SchedulerStats --section Occupancy \
      --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_uniform.avg.pct_of_peak_sustained_active \
      python3 bench/profile_fp8.py $impl $shape > "$OUT/ncu_$tag.txt" 2>&1
    echo "== $tag"
    grep -E "^  [a-zA-Z_].*\(|Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|gmma|Issue Slots Busy|Warp Cycles Per Issued|Shared Memory|L2 Hit|DRAM Throughput|Stall" "$OUT/ncu_$tag.txt" | cut -c1-150 | head -24
  done
done
