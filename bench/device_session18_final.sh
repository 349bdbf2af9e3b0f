#!/bin/sh
# Session 18's closing call: the GPU test suites; compute-sanitizer over the attention workloads and
# over the default workload (now with 128 x 256 bf16 tiles stored under the next tile's first k-block,
# and the fp8 GEMM's 128 x 96 tiles at 200 x 300 x 1000, whose tiles meet all three scale splits);
# then the standard suite twice, to see how far its ratios move between two runs of the same kernels.
#   TILES_COMMIT=<commit> sh bench/device_session18_final.sh
# with <commit> typed in from the checkout that sends the tree (`git rev-parse --short HEAD` there).
. bench/device_env.sh
. bench/device_gpu_suites.sh
WORKLOAD=attention TOOLS="racecheck memcheck" TOOL_TIMEOUT=70 sh bench/device_sanitize.sh
WORKLOAD=default TOOLS="memcheck racecheck synccheck" TOOL_TIMEOUT=60 sh bench/device_sanitize.sh
RUNS="g h" sh bench/device_standard_suite.sh
