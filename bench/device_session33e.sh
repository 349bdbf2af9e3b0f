#!/bin/sh
# Session 33, last call: the three session-33 scripts again after their shared parts moved into
# bench/attention_split.py (input_sets, cudnn_fn) and attention_timeline.record.
#   TILES_COMMIT=<commit> sh bench/device_session33e.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
for s in attention_timeline attention_carry attention_ostage; do
  echo "== $s"; timeout 200 python3 bench/$s.py 2>&1 | tr -d '\000' | grep -v Warning | grep -v "warpgroup 1"
done
