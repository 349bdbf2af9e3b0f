#!/bin/sh
# Session 27, fifth and sixth calls: which TMA boxes the H200 takes for the scales (bench/stma_probe.py;
# the fifth call only), then the scales_tma tests, then bench/fp8_ab.py stma back to back and in the
# suite's timing.  PROBE=1 runs the probes.
#   TILES_COMMIT=<commit> sh bench/device_session27c.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
for v in ${PROBE:+k4@0 k4@3 k4@4 k8@0 k8@3 k16@3 k32@3 k4x1@0 k4x1@1 k8x1@1 m}; do
  timeout 30 python3 bench/stma_probe.py $v 2>&1 | grep -E "ok|Error" | cut -c1-100 | sed "s/^/$v: /"
done
gpu_tests 200 tests/hopper/test_fp8_scales_tma.py -x
timeout 150 python3 bench/fp8_ab.py stma 2>&1 | tail -16
timeout 150 python3 bench/fp8_ab.py stma --suite 2>&1 | tail -16
