#!/bin/sh
# Session 25, third call: is the D = 128 forward held by L2 -> SM bandwidth? ncu's speed-of-light and
# memory workload sections (clocks left alone) for the launched forward and SDPA's cuDNN kernel at
# S = 4k and 16k, non-causal (K and V stream 64 KB a CTA iteration: 5.3 TB/s at 684 TFLOP/s).
#   TILES_COMMIT=<commit> sh bench/device_session25c.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
for impl in tiles cudnn; do
  for shape in "4 16 4096" "1 16 16384"; do
    python3 bench/profile_attention.py $impl fwd $shape 128 0 > /dev/null 2>&1
    echo "== $impl fwd $shape 128 non-causal"
    timeout 120 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section MemoryWorkloadAnalysis_Tables -k "regex:attention|fprop|sdpa|fmha" --launch-skip 3 --launch-count 1 \
        python3 bench/profile_attention.py $impl fwd $shape 128 0 > "$OUT/ncu_${impl}_${shape##* }.txt" 2>&1
    grep -E "^  [a-z_]+.*\(|Duration|Throughput|Busy|Bandwidth|Hit Rate|SM Frequency|Elapsed Cycles" "$OUT/ncu_${impl}_${shape##* }.txt" | head -30
  done
done
