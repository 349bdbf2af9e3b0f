#!/bin/sh
# Session 18, sixth call: the fp8 GEMM's ring-stage descriptors taken from stage 0's (128 x 128 tiles)
# against the sources of the commit before (bench/ab_before_fp8_stage0.json), in both timings; then the
# standard suite with the harness's rotation fixed (each launch takes the next input set).
#   TILES_COMMIT=<commit> sh bench/device_session18f.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
gpu_tests 150 tests/test_gemm_fp8.py tests/portability/test_gemm_fp8_blockscaled.py tests/hopper/test_stream_k.py
timeout 100 python3 bench/fp8_ab.py before bench/ab_before_fp8_stage0.json --suite 2>&1 | tr '\000' ' ' | tee "$OUT/fp8_before_suite.txt"
timeout 100 python3 bench/fp8_ab.py before bench/ab_before_fp8_stage0.json 2>&1 | tee "$OUT/fp8_before_b2b.txt"
timeout 220 python3 -m tiles.bench run --suite standard --kernels gemm,gemm_fp8,attention_fwd,attention_bwd --reps 10 \
    --budget 0.25 --out "$OUT/H200-$(date +%F)f.json" > "$OUT/bench.txt" 2>&1
tail -2 "$OUT/bench.txt"
