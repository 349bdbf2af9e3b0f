#!/bin/sh
# Session 46's changes on the GPU, prepared on the CPU (no device time was left to this session): the
# packed backward (tiles.attention_varlen's gradients) on hopper and cdna-emu (gfx942, gfx950) against
# float64 and bitwise against tiles.attention on each sequence alone, its Hopper and CDNA sources through
# the device's compilers, compute-sanitizer over packed backward launches, then its timing
# (bench/attention_varlen.py --backward). The sanitizers also run a chunked prefill over a paged cache; the
# tests, Hopper's one-shot tile zeroed past a stop (tests/test_stopped_windows.py).
#   sh bench/device_session46a.sh
DEVICE_PYTHONPATH=bench:tests/hopper:tests/portability
. bench/device_env.sh
gpu_tests 180 -n 8 tests/portability/test_attention_varlen.py tests/hopper/test_attention_lower.py \
    tests/test_stopped_windows.py -k "varlen or packed or stop"
sh bench/device_session47b.sh  # the sanitizers over packed launches (and a chunked prefill)
timeout 170 python3 bench/attention_varlen.py --backward 2>&1 | grep -a -v -i "warning" | tr -cd '\11\12\15\40-\176' | tail -c 5000
