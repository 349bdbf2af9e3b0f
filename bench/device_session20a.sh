#!/bin/sh
# Session 20, first call: the fused backward at D = 64 (split_k) again, after the fix of the reducer's
# hand-over (the empty token handed once before the persistent walk, not once a program: a second
# arrival before the consumers took the first miscounted named barrier 4 + 2w, the suspected hang of
# session 19). The fused tests (float64 rule, D = 64 and 128, tails, GQA), the sweep at D = 64 (split
# against fused forms, through autograd), then compute-sanitizer synccheck with the persistent walk
# (FUSED_OPTIONS=persistent: 256 programs on 132 SMs) and racecheck as launched.
#   TILES_COMMIT=<commit> sh bench/device_session20a.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
gpu_tests 150 tests/portability/test_attention.py tests/test_attention_fused.py tests/hopper/test_attention_schedule.py \
    -k "fused"
FUSED_D=64 timeout 200 python3 bench/hopper_tile_sweep.py --only fused --seqs 1024,4096,16384 > "$OUT/fused.txt" 2>&1
python3 bench/fused_summary.py "$OUT/fused.txt"
grep -iE "error|Traceback" "$OUT/fused.txt" | head -5
FUSED_OPTIONS=persistent WORKLOAD=fused TOOLS=synccheck TOOL_TIMEOUT=90 sh bench/device_sanitize.sh
WORKLOAD=fused TOOLS=racecheck TOOL_TIMEOUT=90 sh bench/device_sanitize.sh
