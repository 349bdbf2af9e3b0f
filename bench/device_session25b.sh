#!/bin/sh
# Session 25, second call: the forward's S in key-column parts, each part's maximum taken as it lands
# (bench/attention_split.py: edits of the launched non-causal D = 128 source; bitwise check, then timed).
#   TILES_COMMIT=<commit> sh bench/device_session25b.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
timeout 400 python3 bench/attention_split.py 2>&1 | tail -20 | tee "$OUT/split.txt"
