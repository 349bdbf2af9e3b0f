#!/bin/sh
# Session 19's closing call: the GPU test suites; compute-sanitizer over the attention workloads (now
# with D = 64 forwards of 1000 queries, whose O leaves through TMA stores, and dQ at D = 128 the same
# way) and over the default workload; then the standard suite twice.
#   TILES_COMMIT=<commit> sh bench/device_session19_final.sh
# with <commit> typed in from the checkout that sends the tree (`git rev-parse --short HEAD` there).
. bench/device_env.sh
. bench/device_gpu_suites.sh
WORKLOAD=attention TOOLS="racecheck synccheck memcheck" TOOL_TIMEOUT=80 sh bench/device_sanitize.sh
WORKLOAD=default TOOLS="memcheck racecheck synccheck" TOOL_TIMEOUT=60 sh bench/device_sanitize.sh
RUNS="i j" sh bench/device_standard_suite.sh
