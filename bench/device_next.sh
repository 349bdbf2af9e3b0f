#!/bin/sh
# What session 11 left unmeasured, in one device call (about 2 minutes of wall time):
#  1. initcheck over the suite after the gemm output stopped being copied uninitialized (expected: 0);
#  2. the first tiles call of a process now that eager calls skip the custom-op dispatch, and the
#     compile / cached-load times (tiles.bench.run.compile_times);
#  3. the prepared fp8 GEMM variants against the default and the baselines (bench/hopper_fp8_variants.py).
. bench/device_env.sh
python3 bench/sanitize_suite.py 2>&1 | tail -1  # warm the cache outside the sanitizer
compute-sanitizer --tool initcheck --report-api-errors no --print-limit 3 python3 bench/sanitize_suite.py 2>&1 \
    | grep -E "SUMMARY|sanitize_suite:|Uninitialized" | sort | uniq -c | tee "$OUT/initcheck.txt"
python3 -c "
import json, torch
from tiles.bench.run import compile_times
rows = compile_times(torch.device('cuda'), None)
print(json.dumps(rows))
json.dump(rows, open('$OUT/compile_times.json', 'w'))
"
# the prepared fp8 ping-pong schedule (bench/hopper_fp8_notes.md, "Prepared, not yet measured")
FP8_VARIANTS=bn256,bn256_pp sh bench/device_fp8_variants.sh 2>&1 | tail -30
