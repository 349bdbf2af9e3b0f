#!/bin/sh
# Session 13, first device call: the attention schedule changes (scale folded into the exponent, early
# release of one-shot tiles, one reciprocal a row in the epilogue) checked on the H200, then measured
# against each turned off (bench/hopper_tile_sweep.py --only schedule).
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 -W ignore tests/hopper/test_attention_schedule.py \
    tests/hopper/test_attention_lower.py -rfs --tb=short > "$OUT/tests.txt" 2>&1
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 -W ignore tests/portability/test_attention.py -k hopper \
    -rfs --tb=short >> "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | cut -c1-200 | head -30
timeout 300 python3 bench/hopper_tile_sweep.py --only schedule --seqs ${SEQS:-512,1024,4096,16384} > "$OUT/sweep.txt" 2>&1
tail -2 "$OUT/sweep.txt"
