#!/bin/sh
# Ran at 58b14bd (reverted after this session's measurements: see bench/hopper_notes.md, session 23).
# Session 23, third call: why the fused backward with the last adder's dQ ran 5-7x slower at D = 64
# (23b). Bounds on the kernel alone (bench/fused_bounds.py, session-23 variants), non-causal and causal 4k.
#   TILES_COMMIT=<commit> sh bench/device_session23c.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
FB_CASES=0:4096,1:4096 BOUNDS=persist,persist_nowait,persist_waitonly,persist_noarrive,persist_relaxed,persist_shift \
    timeout 400 python3 bench/fused_bounds.py 2>&1 | tail -4
