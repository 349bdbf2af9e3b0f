#!/bin/sh
# Session 38, first call: the SM clock inside the D = 128 forward (bench/attention_clock.py), rested as
# the suite times and back to back, at S = 2k-16k; at 4k the launched source beside the unsplit forward
# with and without ring_store, to see whether the cycles ring_store saves at the tile boundary show in
# time or in the clock.
#   sh bench/device_session38a.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
timeout 420 python3 bench/attention_clock.py 2>&1 | grep -v Warning
