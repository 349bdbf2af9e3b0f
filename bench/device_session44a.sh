#!/bin/sh
# Session 44's first call: K and V on rings of their own in the D = 128 forward, at 128 keys a block and
# at 160 / 176 / 192 (bench/attention_kv_rings.py), beside the launched kernel and cuDNN; then the forward
# at decode shapes (bench/attention_decode.py, which sets tiles.api.GROUPED_CAUSAL_KEYS).
#   sh bench/device_session44a.sh
DEVICE_PYTHONPATH=bench:tests/hopper:tests/portability
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit --format=csv,noheader
timeout 330 python3 bench/attention_kv_rings.py 4096 16384 2>&1 | grep -v -i warning
timeout 200 python3 bench/attention_decode.py 2>&1 | grep -v -i "warning\|scaled_dot_product_attention("
