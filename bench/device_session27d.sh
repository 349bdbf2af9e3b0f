#!/bin/sh
# Session 27, closing call: the GPU suites, compute-sanitizer over the fp8 GEMM (scale loads and scales
# by TMA, stream-K), the standard suite (zg), then bench/fp8_ab.py stma back to back and in the suite's
# timing (the launched kernels now take the scales by TMA with 128 x 96, 192 x 128 and 128 x 256 tiles).
#   TILES_COMMIT=<commit> sh bench/device_session27d.sh
WORKLOAD=gemm_fp8 RUN=zg sh bench/device_closing.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
timeout 100 python3 bench/fp8_ab.py stma 2>&1 | grep -v "^    bitwise vs launched" | tail -12
timeout 100 python3 bench/fp8_ab.py stma --suite 2>&1 | tail -12
