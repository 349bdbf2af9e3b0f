#!/bin/sh
# Session 38, last call: the split tail's part count at 8k and 16k (the plan takes 5), rested launches
# interleaved (bench/attention_clock.py ab).
#   sh bench/device_session38g.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
timeout 280 python3 bench/attention_clock.py ab 8192 16384 parts3 parts4 parts6 parts8 2>&1 | grep -v Warning
