#!/bin/sh
# Session 33, second call: bench/attention_timeline.py with its variants (the O store left out, every
# CTA's O stores over its own rows, odd CTAs walking their units last first): what the tile's epilogue
# is made of.
#   TILES_COMMIT=<commit> sh bench/device_session33b.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
timeout 400 python3 bench/attention_timeline.py 2>&1 | tr -d '\000' | grep -v Warning
