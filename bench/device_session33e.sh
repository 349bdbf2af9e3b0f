#!/bin/sh
# Session 33, last call: the three session-33 scripts again after their shared parts moved into
# bench/attention_split.py (input_sets, cudnn_fn) and attention_timeline.record; then the forward
# without turns (option pingpong=false), which a phase-offset schedule would need (hopper_notes).
#   TILES_COMMIT=<commit> sh bench/device_session33e.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
for s in attention_timeline attention_carry attention_ostage; do
  echo "== $s"; timeout 200 python3 bench/$s.py 2>&1 | tr -d '\000' | grep -v Warning | grep -v "warpgroup 1"
done
echo "== the forward without turns (option pingpong=false), the kernel alone"
AB_OPTION=pingpong AB_VALUE=false AB_JOBS=fwd:128 AB_CASES=0:4096,0:8192,0:16384 timeout 200 python3 bench/option_ab.py 2>&1 | tr -d '\000' | grep -v Warning
