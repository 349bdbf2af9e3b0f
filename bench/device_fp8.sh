#!/bin/sh
# One device call for the fp8 GEMM (issue #9): correctness + variants, then the benchmark rows.
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv | tee "$OUT/gpu.txt"
python3 bench/hopper_gemm_fp8_check.py 2>&1 | tail -80
python3 -m tiles.bench run --suite quick --kernels gemm_fp8 --reps ${REPS:-20} --budget ${BUDGET:-0.5} \
    --out "$OUT/H200-fp8.json" 2>&1 | tail -40
