#!/bin/sh
# Session 33, fourth call: where the launched D = 128 forward's warps stall at S = 4k (ncu source
# counters; the CSV comes back for reading the tile epilogue's instructions), then
# bench/attention_ostage.py again (a second run of the staged O store beside launched).
#   TILES_COMMIT=<commit> sh bench/device_session33d.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
. bench/ncu_hot.sh
HOT_ROWS=30 hot fwd128_4k 'regex:plst$' bench/profile_attention.py tiles fwd 4 16 4096 128 0
gzip -f "$OUT/fwd128_4k.csv"
timeout 300 python3 bench/attention_ostage.py 2>&1 | tr -d '\000' | grep -v Warning | grep -v "warpgroup"
