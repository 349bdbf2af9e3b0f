#!/bin/sh
# The next session's second call (prepared in session 44): the decode timing with the grouped rows in
# 64-row tiles (bench/attention_decode.py, variant pack_bm64_split16: single-row decode read 2.6-3.5 TB/s
# against cuDNN's 3.8-4.1 in session 44), then the fp8 GEMM's clock (bench/fp8_clock.py, prepared in
# session 38).
#   sh bench/device_session45b.sh
DEVICE_PYTHONPATH=bench:tests/hopper:tests/portability
. bench/device_env.sh
timeout 200 python3 bench/attention_decode.py 2>&1 | grep -a -v -i "warning\|scaled_dot_product_attention(" | tr -cd '\11\12\15\40-\176'
timeout 150 python3 bench/fp8_clock.py 2>&1 | grep -a -v Warning
