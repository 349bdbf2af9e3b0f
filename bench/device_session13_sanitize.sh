#!/bin/sh
# Session 13: compute-sanitizer over the attention kernels with the new schedule (causal pairs in L2
# windows, turns across programs, early release of Q), on grids where persistent CTAs walk several programs.
. bench/device_env.sh
python3 bench/sanitize_suite.py --only attention 2>&1 | tail -2  # warm the kernel cache outside the sanitizers
for tool in ${TOOLS:-racecheck synccheck memcheck}; do
    echo "== $tool" | tee -a "$OUT/sanitizer.txt"
    timeout 150 compute-sanitizer --tool $tool --report-api-errors no --print-limit 2 \
        python3 bench/sanitize_suite.py --only attention 2>&1 \
        | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|sanitize_suite:|Invalid|Race|Barrier|Hazard" | sort | uniq -c | head -12 \
        | tee -a "$OUT/sanitizer.txt"
done
