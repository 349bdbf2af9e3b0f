#!/bin/sh
# Session 33, third call: bench/attention_ostage.py (O stored through TMA from the last block's K
# tile), bitwise against launched, timed beside cuDNN, with the timeline's phases.
#   TILES_COMMIT=<commit> sh bench/device_session33c.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
timeout 450 python3 bench/attention_ostage.py 2>&1 | tr -d '\000' | grep -v Warning
