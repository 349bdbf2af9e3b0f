#!/bin/sh
# Session 15, third call: the fp8 tests (192-row tiles through tiles.gemm_fp8), the fp8 A/B at the five
# shapes, then the backward's kernel times against cuDNN's (torch.profiler, per step of fwd + bwd).
#   sh bench/device_session15c.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
timeout 200 python3 -m pytest -q -p no:cacheprovider -W ignore tests/hopper/test_fp8_scales.py tests/hopper/test_fp8.py \
    -rfEs --tb=short > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/tests.txt" | cut -c1-200 | head -20
timeout 200 python3 bench/fp8_ab.py tiles 2>&1 | tee "$OUT/fp8_ab.txt"
for s in 4096 1024; do
  for d in 64 128; do
    h=$((2048 / d)); b=$((16384 / s))
    for impl in tiles cudnn; do
      echo "== fwd + bwd kernels, $impl, B=$b H=$h S=$s D=$d non-causal"
      timeout 60 python3 bench/profile_attention.py $impl bwd $b $h $s $d 0 --table 2>&1 | grep "a step"
    done
  done
done
