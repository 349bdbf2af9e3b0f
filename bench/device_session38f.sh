#!/bin/sh
# Session 38, sixth call: option ring_store at D = 64 (bench/attention_d64_ring.py), causal and not,
# S = 512 / 1k / 2k, against the launcher's choices.
#   sh bench/device_session38f.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
timeout 280 python3 bench/attention_d64_ring.py 2>&1 | grep -v Warning
