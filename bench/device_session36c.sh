#!/bin/sh
# Session 36, third call: the D = 128 forward's O store at short sequences. The store deferred under
# the next tile's first S (bench/attention_defer.py) at S = 512 / 1k / 2k / 4k / 16k; store widths and
# the once-a-tile bound test (bench/attention_ostore.py) at S = 512 / 1k / 2k; then session 33's O
# staged in the last K tile with a TMA store (bench/attention_ostage.py) at S = 512 / 1k.
#   TILES_COMMIT=<c> sh bench/device_session36c.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
timeout 200 python3 bench/attention_defer.py 512 1024 2048 4096 16384 2>&1 | grep -v Warning
timeout 200 python3 bench/attention_ostore.py 512 1024 2048 2>&1 | grep -v Warning
timeout 150 python3 bench/attention_ostage.py 512 1024 2>&1 | grep -v Warning
