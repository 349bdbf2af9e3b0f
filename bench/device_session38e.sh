#!/bin/sh
# Session 38, fifth call: the split tail's part count with ring_store launched (the plan takes 3 at 4k,
# 5 at 8k and 16k), rested launches interleaved (bench/attention_clock.py ab).
#   sh bench/device_session38e.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
timeout 250 python3 bench/attention_clock.py ab 4096 parts2 parts4 parts5 parts6 2>&1 | grep -v Warning
