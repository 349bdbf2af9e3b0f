#!/bin/sh
# Session 21, second call: the D = 64 fused backward as launched now (not rotated, measured in the
# first call) and dS stored four pairs a stmatrix (ops.h `store`, option `stmatrix`): the attention
# GPU tests, then the fused sweep at D = 64 (S = 512 to 16k: does FUSED_BACKWARD_D start lower?) and
# at D = 128 (fused is not launched there), each with dS a pair a st.shared beside it (`nsm`), then
# fused_bounds at D = 64: the launched kernel alone against dS without stmatrix and dQ unscaled.
#   TILES_COMMIT=<commit> sh bench/device_session21b.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
gpu_tests 120 -n 8 tests/portability/test_attention.py tests/test_attention_fused.py tests/hopper/test_attention_schedule.py
grep -q " passed" "$OUT/tests.txt" || { tail -c 600 "$OUT/tests.txt"; exit 1; }
FUSED_D=64 FUSED_MODES=fused,fused_nsm,fused_rot,fused_pp timeout 120 python3 bench/hopper_tile_sweep.py --only fused \
    --seqs 512,1024,4096,16384 > "$OUT/fused64.txt" 2>&1
python3 bench/fused_summary.py "$OUT/fused64.txt"
FUSED_D=128 FUSED_MODES=fused,fused_nsm timeout 120 python3 bench/hopper_tile_sweep.py --only fused \
    --seqs 1024,4096,16384 > "$OUT/fused128.txt" 2>&1
python3 bench/fused_summary.py "$OUT/fused128.txt"
BOUNDS=persist,persist_nostsm,persist_nodqscale timeout 100 python3 bench/fused_bounds.py > "$OUT/bounds.txt" 2>&1
cat "$OUT/bounds.txt" | cut -c1-400
grep -ihE "error|Traceback" "$OUT"/fused64.txt "$OUT"/fused128.txt "$OUT"/bounds.txt | head -5
