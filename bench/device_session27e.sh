#!/bin/sh
# Session 27, eighth call: compute-sanitizer over the fp8 GEMM workload again (the closing call's run
# stopped at a configuration whose 4 stages did not fit beside the scale boxes).
#   TILES_COMMIT=<commit> sh bench/device_session27e.sh
WORKLOAD=gemm_fp8 TOOLS="memcheck racecheck synccheck" TOOL_TIMEOUT=75 sh bench/device_sanitize.sh
