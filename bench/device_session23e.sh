#!/bin/sh
# Ran at 57d6e79 (reverted after this session's measurements: see bench/hopper_notes.md, session 23).
# Session 23, fifth call: what the arrival costs in the finish_buf form (23d: 4.7x slower than without
# it at D = 64, 4k): the kernel alone without the finish's load, with a plain atomic whose value is
# read, and with one whose value is not (fused_bounds nofinish / retonly / redonly).
#   TILES_COMMIT=<commit> sh bench/device_session23e.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
FB_CASES=0:4096 BOUNDS=persist,persist_nofinish,persist_retonly,persist_redonly,persist_noarrive \
    timeout 300 python3 bench/fused_bounds.py 2>&1 | tail -2
