#!/bin/sh
# Session 17, third call: two pairs a store on by default in the attention lowering (wide_stores = 2).
# The Hopper attention tests on the GPU (portability suite and the schedule tests), then the GEMMs'
# epilogues (bench/epilogue_ab.py: TMA store against stores from registers, 1, 2 or 4 pairs a store),
# the attention sweep against a pair a store (wd0), 4 pairs (wd4) and, for the forward, whole tiles
# untested (whole), and the standard suite's attention rows.
#   TILES_COMMIT=<the sending checkout's commit> sh bench/device_session17c.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
gpu_tests 170 -n 4 tests/portability/test_attention.py tests/hopper/test_attention_schedule.py -k "hopper or gpu"
timeout 150 python3 bench/epilogue_ab.py bf16,fp8 > "$OUT/epilogue.txt" 2>&1
cat "$OUT/epilogue.txt" | cut -c1-400
timeout 200 python3 bench/hopper_tile_sweep.py --only schedule --kernels fwd,dkdv --seqs 512,2048,16384 \
    --variants wd0,wd4,whole --dims 64,128 > "$OUT/sweep.txt" 2>&1
python3 bench/sweep_table.py "$OUT/sweep.txt"
timeout 150 python3 -m tiles.bench run --suite standard --kernels attention_fwd,attention_bwd --reps 10 \
    --budget 0.25 --out "$OUT/H200-$(date +%F)c.json" > "$OUT/bench.txt" 2>&1
tail -2 "$OUT/bench.txt"
