#!/bin/sh
# compute-sanitizer over one sanitize_suite.py workload (attention, gemm_fp8, fused, split, ring, decode, kv, or default: every
# suite kernel at small shapes with tails), each tool in turn; the summary lines go to
# $OUT/sanitizer.txt. Run by the device scripts:
#   WORKLOAD=gemm_fp8 TOOL_TIMEOUT=90 sh bench/device_sanitize.sh
. bench/device_env.sh
WORKLOAD=${WORKLOAD:?attention, gemm_fp8, fused, split, ring, decode, kv or default}
only=""
[ "$WORKLOAD" = default ] || only="--only $WORKLOAD"
python3 bench/sanitize_suite.py $only 2>&1 | tail -1  # warm the kernel cache outside the sanitizers
for tool in ${TOOLS:-racecheck synccheck memcheck}; do
    echo "== $tool ($WORKLOAD workload)" | tee -a "$OUT/sanitizer.txt"
    timeout "${TOOL_TIMEOUT:-150}" compute-sanitizer --tool "$tool" --report-api-errors no --print-limit 2 \
        python3 bench/sanitize_suite.py $only 2>&1 \
        | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|sanitize_suite:|Invalid|Race|Barrier|Hazard" | sort | uniq -c | head -12 \
        | tee -a "$OUT/sanitizer.txt"
done
