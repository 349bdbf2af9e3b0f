#!/bin/sh
# Session 16, third call: the fused backward rebuilt after FlashAttention-3 (two dS copies and one barrier
# a block, dQ's reduce issued by the producer warpgroup's warp 1, LSE and Delta loaded a block ahead):
# its GPU tests and compute-sanitizer, then the fused backward against the split one and each change
# alone, and the split kernels with and without the prefetch.
#   sh bench/device_session16d.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
gpu_tests 200 tests/portability/test_attention.py -k "hopper and (fused or backward)"
WORKLOAD=fused TOOL_TIMEOUT=100 sh bench/device_sanitize.sh
timeout 240 python3 bench/hopper_tile_sweep.py --only fused --seqs 1024,4096,16384 > "$OUT/fused.txt" 2>&1
python3 bench/fused_table.py "$OUT/fused.txt" || tail -5 "$OUT/fused.txt"
timeout 200 python3 bench/hopper_tile_sweep.py --only schedule --kernels dkdv --seqs 1024,4096,16384 \
    --variants nopf --dims 64,128 > "$OUT/sweep.txt" 2>&1
python3 bench/sweep_table.py "$OUT/sweep.txt"
