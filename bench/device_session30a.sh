#!/bin/sh
# Session 30, first call: the promotion FFMAs' control bits rewritten on the kernels tiles.gemm_fp8
# launches now (scales by TMA; bench/ffma_bits.py --launched, with the imm bound), then the D = 128
# forward with 192 query rows in three consumer warpgroups and no rotated loop (the layout that fits
# 160 registers) against the launched 128 rows, the kernel alone (bench/option_ab.py).
#   TILES_COMMIT=<commit> sh bench/device_session30a.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
timeout 240 python3 bench/ffma_bits.py --launched 2>&1 | tr -d '\000' | tail -12
AB_OPTION=rotate AB_VALUE=false AB_CONFIG='{"BM": 192}' AB_JOBS=fwd:128 \
    AB_CASES=0:1024,0:4096,0:16384,1:4096,1:16384 timeout 200 python3 bench/option_ab.py 2>&1 | tail -6
timeout 150 python3 bench/fp8_bn192.py 2>&1 | tr -d '\000' | tail -6
