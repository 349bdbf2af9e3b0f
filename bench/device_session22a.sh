#!/bin/sh
# Session 22, first call: LSE and Delta into each ring stage by the producer thread's TMA (option
# vec_tma, FlashAttention-3's way) against the launched forms, which load them from global memory a
# block ahead (session 21: the proxy fences wait for those loads, 2.6-6.3 %). The GPU tests of the
# option (same bits as without, padded and strided rows), then the D = 64 fused kernel alone
# (fused_bounds), the backward through autograd at D = 64 and D = 128 (fused forms over split), and
# the dK/dV kernel alone at both head dims.
#   TILES_COMMIT=<commit> sh bench/device_session22a.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
gpu_tests 120 -n 8 tests/hopper/test_attention_schedule.py -k "vectors or fused" tests/test_attention_fused.py
grep -q " passed" "$OUT/tests.txt" || { tail -c 600 "$OUT/tests.txt"; exit 1; }
BOUNDS=persist,persist_vt timeout 100 python3 bench/fused_bounds.py > "$OUT/bounds.txt" 2>&1
cut -c1-400 "$OUT/bounds.txt"
FUSED_D=64 FUSED_MODES=fused,fused_vt,fused_vt_rot timeout 150 python3 bench/hopper_tile_sweep.py --only fused \
    --seqs 512,1024,4096,16384 > "$OUT/fused64.txt" 2>&1
python3 bench/fused_summary.py "$OUT/fused64.txt"
FUSED_D=128 FUSED_MODES=fused,fused_vt timeout 120 python3 bench/hopper_tile_sweep.py --only fused \
    --seqs 1024,4096,16384 > "$OUT/fused128.txt" 2>&1
python3 bench/fused_summary.py "$OUT/fused128.txt"
timeout 120 python3 bench/hopper_tile_sweep.py --only schedule --kernels dkdv --variants vt \
    --seqs 1024,4096,16384 > "$OUT/dkdv.txt" 2>&1
python3 bench/sweep_table.py "$OUT/dkdv.txt" 2>&1 | head -30
grep -ihE "error|Traceback" "$OUT"/*.txt | head -5
