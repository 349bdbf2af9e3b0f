#!/bin/sh
# Session 16, last call: dK/dV at D = 64 launched peeled (SCHEDULES): the portability suite's attention
# tests on the GPU backends, then the standard suite's attention backward rows (a result file of its
# own beside the closing run's).
#   TILES_COMMIT=<the sending checkout's commit> sh bench/device_session16k.sh
. bench/device_env.sh
gpu_tests 150 -n 4 tests/portability/test_attention.py -k "hopper"
timeout 150 python3 -m tiles.bench run --suite standard --kernels attention_bwd --reps 10 \
    --budget 0.25 --out "$OUT/H200-$(date +%F)b.json" > "$OUT/bench.txt" 2>&1
tail -2 "$OUT/bench.txt"
