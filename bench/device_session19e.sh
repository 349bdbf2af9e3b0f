#!/bin/sh
# Session 19, sixth call: the refusal of an output TMA cannot map (GPU test), then what each part of
# the D = 128 forward's softmax costs (bench/attention_bounds.py: the launched kernel with its
# exponential, row maximum, O rescale or row sum taken out, beside cuDNN at S = 4k and 16k).
#   TILES_COMMIT=<commit> sh bench/device_session19e.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
gpu_tests 150 tests/hopper/test_attention_schedule.py -k "tma_store"
timeout 200 python3 bench/attention_bounds.py 2>&1 | tail -4 | tee "$OUT/attention_bounds.txt"
