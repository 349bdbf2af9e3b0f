#!/bin/sh
# Session 36, first call: the D = 128 forward in 2-CTA clusters with K and V multicast
# (bench/attention_cluster.py): occupancy and split parity, outputs bitwise against launched, then
# back-to-back and suite timing beside launched and cuDNN at S = 4k / 8k / 16k.
#   TILES_COMMIT=<c> sh bench/device_session36a.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
timeout 420 python3 bench/attention_cluster.py 2>&1 | grep -v Warning
