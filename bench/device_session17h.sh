#!/bin/sh
# (Run in session 17; the option it measured was removed after, measured neutral: bench/hopper_notes.md.)
# Session 17, eighth call: the forward with the producer's sleep limit again (idle_wait), where the
# seventh call saw 1.03-1.09x (D = 128, S = 4k) and elsewhere noise: D = 128 and 64 at S = 2k, 4k, 8k,
# twice over.
#   TILES_COMMIT=<the sending checkout's commit> sh bench/device_session17h.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
for run in 1 2; do
  timeout 150 python3 bench/hopper_tile_sweep.py --only schedule --kernels fwd --seqs 2048,4096,8192 \
      --variants iw20us,iw1ms --dims 128,64 > "$OUT/sweep$run.txt" 2>&1
  python3 bench/sweep_table.py "$OUT/sweep$run.txt"
done
