#!/bin/sh
# Session 38, second call: rested launches interleaved (bench/attention_clock.py ab): at S = 4k the
# launched forward (split tail), the unsplit one with and without ring_store, and the launched source
# with 1 / 2 us of idle at each unit's top; at 16k the launched and the idle ones. Time, clock, cycles.
#   sh bench/device_session38b.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
timeout 400 python3 bench/attention_clock.py ab 4096 16384 2>&1 | grep -v Warning
