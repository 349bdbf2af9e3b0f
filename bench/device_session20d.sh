#!/bin/sh
# Session 20, fourth call: the fused backward at D = 64 launched persistent (no spill now: the walk's
# constants computed in each role, 32 producer registers with a reducer warp). The fused tests, the
# sweep's forms (FUSED_D=64: rotation, turns, peel, dS copies, one CTA a program), fused_bounds.py,
# then where its warps stall (ncu source counters, S = 4k, non-causal; bench/ncu_hotspots.py).
#   TILES_COMMIT=<commit> sh bench/device_session20d.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
gpu_tests 120 tests/portability/test_attention.py tests/test_attention_fused.py tests/hopper/test_attention_schedule.py -k "fused"
FUSED_D=64 timeout 200 python3 bench/hopper_tile_sweep.py --only fused --seqs 1024,4096,16384 > "$OUT/fused.txt" 2>&1
python3 bench/fused_summary.py "$OUT/fused.txt"
grep -iE "error|Traceback" "$OUT/fused.txt" | head -5
timeout 100 python3 bench/fused_bounds.py 2>&1 | grep -vE "^\s*$" | tail -4
python3 bench/profile_attention.py tiles bwd 4 32 4096 64 0 --fused >/dev/null 2>&1  # compile outside the profiler
timeout 150 ncu --clock-control none -o "$OUT/f64" -f --section SourceCounters --section WarpStateStats -k "regex:fused" \
  --launch-skip 3 --launch-count 1 python3 bench/profile_attention.py tiles bwd 4 32 4096 64 0 --fused > "$OUT/ncu_f64.log" 2>&1
ncu -i "$OUT/f64.ncu-rep" --page source --csv --print-source sass > "$OUT/f64.csv" 2> "$OUT/f64.err"
python3 bench/ncu_hotspots.py "$OUT/f64.csv" 40 2>&1 | cut -c1-170 || tail -5 "$OUT/ncu_f64.log"
rm -f "$OUT/f64.ncu-rep"
