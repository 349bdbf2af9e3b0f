#!/bin/sh
# Session 15, second call: the fp8 GPU tests with clamped scales by default and 192-row tiles, the A/B
# again (bench/fp8_ab.py tiles), then where attention's time goes against cuDNN: ncu on the D = 128,
# S = 16k forward (tiles, cuDNN), and the backward's kernels (torch.profiler) at S = 4k, D = 64 and 128.
#   sh bench/device_session15b.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
timeout 240 python3 -m pytest -q -p no:cacheprovider -W ignore tests/hopper/test_fp8_scales.py tests/hopper/test_stream_k.py \
    tests/hopper/test_fp8.py tests/test_gemm_fp8.py tests/portability/test_gemm_fp8_blockscaled.py -rfE --tb=short > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | cut -c1-300 | head -20
timeout 200 python3 bench/fp8_ab.py tiles 2>&1 | tee "$OUT/fp8_ab.txt"
for impl in tiles cudnn; do
  for d in 64 128; do
    h=$((2048 / d))
    echo "== backward kernels, $impl, B=4 H=$h S=4096 D=$d non-causal"
    timeout 60 python3 bench/profile_attention.py $impl bwd 4 $h 4096 $d 0 --table 2>&1 | grep -E "^ +[a-zA-Z_]|Self CUDA time total" | cut -c1-72,100-200 | head -12
  done
done
python3 bench/profile_attention.py tiles fwd 1 16 16384 128 0  # compile outside the profiler
for impl in tiles cudnn; do
  if [ $impl = tiles ]; then k="regex:attention"; else k="regex:cudnn|sm90|fmha|flash|xmma"; fi
  timeout 150 ncu --clock-control none --target-processes all -k "$k" --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats \
    --metrics "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed_pipe_xu.sum,sm__cycles_elapsed.avg.per_second" \
    python3 bench/profile_attention.py $impl fwd 1 16 16384 128 0 > "$OUT/ncu_fwd_$impl.txt" 2>&1
  echo "== ncu forward D=128 S=16k non-causal: $impl"
  grep -E "^  [a-zA-Z_].*\(|Duration|SM Frequency|Compute \(SM\) Throughput|gmma|Issue Slots Busy|Warp Cycles Per Issued|inst_executed|cycles_elapsed" "$OUT/ncu_fwd_$impl.txt" | cut -c1-150 | head -20
  grep -E "^    smsp__average_warps" "$OUT/ncu_fwd_$impl.txt" | awk '$NF+0 >= 0.1' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | head -12
done
