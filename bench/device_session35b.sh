#!/bin/sh
# Session 35, second call: 2-CTA clusters (B by multicast, stream-K over the clusters) across the fp8
# tiles, block-scaled (bench/fp8_ab.py clusters, back to back and in the suite's timing) and row-wise
# (bench/fp8_rowwise_ab.py clusters, both timings).
#   TILES_COMMIT=<commit> sh bench/device_session35b.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
timeout 150 python3 bench/fp8_ab.py clusters 2>&1 | grep -v Warning
timeout 150 python3 bench/fp8_ab.py clusters --suite 2>&1 | grep -v Warning
timeout 250 python3 bench/fp8_rowwise_ab.py clusters 2>&1 | grep -v Warning
