#!/bin/sh
# Session 27, fourth call: the A-scale tensor map alone in a probe kernel (bench/stma_probe.py).
. bench/device_env.sh
for v in k k_far k_first m m_far; do
  timeout 60 python3 bench/stma_probe.py $v 2>&1 | grep -E "ok|Error" | cut -c1-160
done
