#!/bin/sh
# Session 13: the attention tests on the H200, then the schedule sweep: each choice of the Hopper attention
# lowering turned off in turn (VARIANTS: nofold, noearly, nowindow, nocont, old; DIMS, SEQS).
. bench/device_env.sh
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 -W ignore tests/hopper/test_attention_schedule.py \
    tests/hopper/test_attention_lower.py -rfs --tb=short > "$OUT/tests.txt" 2>&1
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 -W ignore tests/portability/test_attention.py -k hopper \
    -rfs --tb=short >> "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | cut -c1-200 | head -30
timeout 300 python3 bench/hopper_tile_sweep.py --only schedule --seqs ${SEQS:-512,1024,4096,16384} \
    --variants ${VARIANTS:-nocont} --dims ${DIMS:-128,64} > "$OUT/sweep.txt" 2>&1
tail -2 "$OUT/sweep.txt"
