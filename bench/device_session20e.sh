#!/bin/sh
# Session 20, fifth call: the D = 64 fused backward after the register budgets' fix (32 + 2 x 240
# exceeded the CTA's 168 x 384 registers and the fourth call's kernels hung in setmaxnreg.inc; now
# 40 + 2 x 232, and the template's static_assert refuses such a sum). tiles.attention's backward takes
# it at D = 64 now: the portability suite's attention tests, the fused tests, then the sweep
# (FUSED_D=64, S = 512 to 16k) of the launched form against rotation off and turns.
# At 27f0b08 the tests ran without -n and did not end within 110 s (none failed), so the sweep did not
# run; they take -n 8 now, and the script is what the next session runs first.
#   TILES_COMMIT=<commit> sh bench/device_session20e.sh
# (Ran as session 21's first call, at a660e39; the sweep's D = 64 modes were renamed after it, when
# the launched form stopped rotating: fused_norot is now fused, and the rotated form fused_rot.)
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
gpu_tests 110 -n 8 tests/portability/test_attention.py tests/test_attention_fused.py tests/hopper/test_attention_schedule.py
grep -q " passed" "$OUT/tests.txt" || { tail -c 600 "$OUT/tests.txt"; exit 1; }
FUSED_D=64 FUSED_MODES=fused,fused_norot,fused_pp timeout 160 python3 bench/hopper_tile_sweep.py --only fused \
    --seqs 512,1024,4096,16384 > "$OUT/fused.txt" 2>&1
python3 bench/fused_summary.py "$OUT/fused.txt"
grep -iE "error|Traceback" "$OUT/fused.txt" | head -5
