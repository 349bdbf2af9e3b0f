#!/bin/sh
# Session 13, attention standard benchmark after the schedule changes, and ncu on the short-sequence forward.
. bench/device_env.sh
timeout 330 python3 -m tiles.bench run --suite standard --kernels attention_fwd,attention_bwd --reps 10 \
    --budget 0.25 --out "$OUT/attn.json" > "$OUT/bench.txt" 2>&1
tail -3 "$OUT/bench.txt"
for c in 1 0; do
  timeout 100 ncu --target-processes all -k regex:attention_fwd --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats \
      python3 bench/profile_attention.py 512 128 $c > "$OUT/ncu_s512_c$c.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|L2 Hit|Stall|Warp Cycles Per Issued" "$OUT/ncu_s512_c$c.txt" | head -20
done
