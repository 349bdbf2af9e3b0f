#!/bin/sh
# Session 22, the calls after the closing one (run as three commands, kept here as one): the D = 128
# fused kernel over the split backward at 16k queries, twice (does it pay causal there?); after
# FUSED_BACKWARD_D took it at 16k causal (9c5923f), the attention GPU tests and the standard suite
# twice (s, t). The sweep ran on f2b9e26's tree (the same kernels; it sets the routing itself).
#   TILES_COMMIT=<commit> sh bench/device_session22d.sh
DEVICE_PYTHONPATH=tests/hopper:tests/portability:bench
. bench/device_env.sh
FUSED_D=128 FUSED_GQA=0 FUSED_MODES=fused,fused_vt_rot timeout 150 python3 bench/hopper_tile_sweep.py --only fused \
    --seqs 16384,16384 > "$OUT/fused128.txt" 2>&1
python3 bench/fused_summary.py "$OUT/fused128.txt"
gpu_tests 150 -n 8 tests/portability/test_attention.py tests/test_attention_fused.py tests/hopper/test_attention_schedule.py
RUNS="s t" sh bench/device_standard_suite.sh
python3 bench/suite_ratios.py "$OUT"/H200-*s.json "$OUT"/H200-*t.json | grep -E "geomean"
