#!/bin/sh
# Session 41's first call: the decode work's GPU tests (the api's grouped rows on hopper and both cdna-emu
# targets, the short grid's split through the api), then the forward at decode shapes
# (bench/attention_decode.py: the api, the launcher on the rows as given, forced key parts, SDPA's
# backends).
#   sh bench/device_session41a.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
gpu_tests 200 -n 8 tests/portability/test_attention.py tests/hopper/test_split_tail.py tests/test_api_dispatch.py \
    -k "decode or split"
timeout 330 python3 bench/attention_decode.py 2>&1 | grep -v Warning
