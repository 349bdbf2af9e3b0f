#!/bin/sh
# Session 22, second call: vec_tma on for the dK/dV kernels and the D = 128 fused kernel
# (SCHEDULES, after the first call). The attention GPU tests with it; then through autograd, S = 512
# to 16k: at D = 128 the fused kernel (vec_tma) over the split backward (its dK/dV now with vec_tma),
# beside the fused kernel without it and rotated; at D = 64 the launched fused kernel over split,
# beside it with vec_tma and with vec_tma rotated; and the D = 64 fused kernel alone again.
#   TILES_COMMIT=<commit> sh bench/device_session22b.sh
DEVICE_PYTHONPATH=tests/hopper:tests/portability:bench
. bench/device_env.sh
gpu_tests 150 -n 8 tests/portability/test_attention.py tests/test_attention_fused.py tests/hopper/test_attention_schedule.py
grep -q " passed" "$OUT/tests.txt" || { tail -c 600 "$OUT/tests.txt"; exit 1; }
FUSED_D=128 FUSED_MODES=fused,fused_novt,fused_vt_rot timeout 150 python3 bench/hopper_tile_sweep.py --only fused \
    --seqs 512,1024,2048,4096,8192,16384 > "$OUT/fused128.txt" 2>&1
python3 bench/fused_summary.py "$OUT/fused128.txt"
FUSED_D=64 FUSED_MODES=fused,fused_vt,fused_vt_rot timeout 150 python3 bench/hopper_tile_sweep.py --only fused \
    --seqs 512,1024,2048,4096,8192,16384 > "$OUT/fused64.txt" 2>&1
python3 bench/fused_summary.py "$OUT/fused64.txt"
BOUNDS=persist,persist_vt timeout 100 python3 bench/fused_bounds.py > "$OUT/bounds.txt" 2>&1
cut -c1-400 "$OUT/bounds.txt"
grep -ihE "error|Traceback" "$OUT"/*.txt | head -5
