#!/bin/sh
# Session 35, fifth call: compute-sanitizer (memcheck, racecheck, synccheck) over the fp8 workload, which
# now runs stream-K over 2-CTA clusters, 96-wide tiles in clusters and the one-launch K-major copies
# (bench/sanitize_suite.py --only gemm_fp8).
#   TILES_COMMIT=<commit> sh bench/device_session35e.sh
. bench/device_env.sh
DEVICE_PYTHONPATH=bench WORKLOAD=gemm_fp8 TOOLS="memcheck racecheck synccheck" TOOL_TIMEOUT=150 sh bench/device_sanitize.sh
