#!/bin/sh
# Session 14: warp stall reasons (ncu, per issued instruction) of the fp8 GEMM against torch._scaled_mm row-wise.
. bench/device_env.sh
python3 bench/profile_fp8.py tiles 1024 1536 7168
for shape in "1024 1536 7168" "8192 8192 8192"; do
  for impl in tiles scaled_mm; do
    tag=$(echo "$impl $shape" | tr ' ' _)
    if [ $impl = tiles ]; then k="regex:gemm_fp8"; else k="regex:gemm|xmma|cutlass|sm90"; fi
    timeout 120 ncu --clock-control none --target-processes all -k "$k" --launch-skip 3 --launch-count 1 \
      --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__inst_executed_pipe_tensor_op_gmma.sum" \
      python3 bench/profile_fp8.py $impl $shape > "$OUT/stall_$tag.txt" 2>&1
    echo "== $tag"
    grep -E "^    (smsp|sm__)" "$OUT/stall_$tag.txt" | awk '$NF+0 >= 0.05 || /inst_executed|tensor/' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | head -30
  done
done
