#!/bin/sh
# Session 37, fourth call: option ring_store's speed, causal at S = 512 / 1k / 2k / 4k, and non-causal
# at 4k (forced, without the split tail), both timings, beside cuDNN.
#   sh bench/device_session37c.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
timeout 300 python3 bench/attention_ring_store.py 512 1024 2048 4096 causal 2>&1 | grep -v Warning
timeout 100 python3 bench/attention_ring_store.py 4096 non-causal 2>&1 | grep -v Warning
