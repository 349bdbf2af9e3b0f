#!/bin/sh
# Session 25, fourth call: O's rescale skipped where a warp's rows kept their maximum, and part of the
# exponentials on the FMA pipe (bench/attention_softmax_edits.py), beside the launched forward and cuDNN.
#   TILES_COMMIT=<commit> sh bench/device_session25d.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
timeout 400 python3 bench/attention_softmax_edits.py 2>&1 | tail -20 | tee "$OUT/softmax_edits.txt"
