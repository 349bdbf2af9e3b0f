#!/bin/sh
# One device call for the fp8 GEMM variants (issue #9): smoke test every variant under a timeout (a
# variant that hangs or fails is left out), then correctness + interleaved timing of the survivors.
# FP8_VARIANTS=a,b (optional) keeps only those variants next to base/base_again, e.g.
#   FP8_VARIANTS=bn256,bn256_pp sh bench/device_fp8_variants.sh   # the prepared ping-pong schedule
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
timeout ${SMOKE_S:-100} python3 bench/hopper_fp8_variants.py --smoke 2>&1 | tee "$OUT/smoke.txt"
ok=$(grep '^OKVAR' "$OUT/smoke.txt" | cut -d' ' -f2 | paste -sd, -)
echo "variants that passed the smoke test: $ok"
timeout ${FULL_S:-115} python3 bench/hopper_fp8_variants.py --only "$ok" 2>&1 | tee "$OUT/full.txt"
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader | tee -a "$OUT/gpu.txt"
