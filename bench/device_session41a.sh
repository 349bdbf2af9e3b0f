#!/bin/sh
# Session 41's first call: the fp8 GEMM's clock (bench/fp8_clock.py, prepared in session 38), then
# compute-sanitizer over the ring / split attention workloads (not run since 413ca9e; the split merge
# changed in session 40).
#   sh bench/device_session41a.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
timeout 220 python3 bench/fp8_clock.py 2>&1 | grep -v Warning
WORKLOAD=ring TOOLS="synccheck racecheck memcheck" TOOL_TIMEOUT=80 sh bench/device_sanitize.sh
