#!/bin/sh
# Session 42's second call: compute-sanitizer over the decode workload (the api's grouped rows, short grids
# cut along the keys on grids as long as their units, four causal rows) and the ring / split workloads (not
# run since 413ca9e), then the fp8 GEMM's clock (bench/fp8_clock.py, prepared in session 38, never run).
#   sh bench/device_session42b.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
for w in decode ring; do
    DEVICE_PYTHONPATH=bench WORKLOAD=$w TOOLS="synccheck racecheck memcheck" TOOL_TIMEOUT=40 sh bench/device_sanitize.sh
done
timeout 240 python3 bench/fp8_clock.py 2>&1 | grep -v Warning
