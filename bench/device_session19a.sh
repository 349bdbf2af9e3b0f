#!/bin/sh
# Session 19, first call: what the fp8 GEMM's promotion costs (bench/fp8_bounds.py: the launched kernel
# with its FFMAs made FADDs, or with no promotion, at the five shapes and on 128 x 128 tiles where
# the launcher takes 128 x 256; clocks and power at 8192^3), then ncu's stall samples by instruction at
# 8192^3 for tiles and row-wise _scaled_mm, and at 1024 x 1536 x 7168 for tiles (128 x 96 tiles).
#   TILES_COMMIT=<commit> sh bench/device_session19a.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
. bench/ncu_hot.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
timeout 200 python3 bench/fp8_bounds.py --power 2>&1 | tee "$OUT/fp8_bounds.txt"
HOT_ROWS=24 hot fp8_big "regex:gemm_fp8" bench/profile_fp8.py tiles 8192 8192 8192
HOT_ROWS=16 hot fp8_big_rowwise "regex:gemm|sm90|cutlass" bench/profile_fp8.py scaled_mm 8192 8192 8192
HOT_ROWS=16 hot fp8_small "regex:gemm_fp8" bench/profile_fp8.py tiles 1024 1536 7168
