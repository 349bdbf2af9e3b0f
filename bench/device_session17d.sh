#!/bin/sh
# Session 17, fourth call: the fp8 GEMM with 128-wide tiles launched with stores from registers, 4 pairs
# a store (lower_fp8 prepare): its GPU tests, then bench/epilogue_ab.py fp8 against the TMA store it
# replaced; the forward at D = 64 with 128 query rows (two warpgroups taking turns) and/or 64-key
# blocks, against the launched 192 rows (bench/hopper_tile_sweep.py --only fwd).
#   TILES_COMMIT=<the sending checkout's commit> sh bench/device_session17d.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
gpu_tests 120 -n 4 tests/hopper/test_fp8.py tests/test_gemm_fp8.py tests/hopper/test_stream_k.py
timeout 120 python3 bench/epilogue_ab.py fp8 > "$OUT/epilogue.txt" 2>&1
cut -c1-400 "$OUT/epilogue.txt"
timeout 200 python3 bench/hopper_tile_sweep.py --only fwd --variants bm128,bm128n64,bn64 --dims 64 > "$OUT/sweep.txt" 2>&1
python3 bench/sweep_table.py "$OUT/sweep.txt"
