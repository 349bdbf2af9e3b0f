#!/bin/sh
# Session 22, third call: vec_tma as launched now (dK/dV at both head dims, the fused kernel at D = 128,
# and at D = 64 non-causal). The attention GPU tests, compute-sanitizer over the fused workload (now
# also the split backward, and LSE rows that need the padded copy), the standard suite once, and the
# D = 128 fused kernel over the split backward at long sequences (is it worth launching there?).
#   TILES_COMMIT=<commit> sh bench/device_session22c.sh
DEVICE_PYTHONPATH=tests/hopper:tests/portability:bench
. bench/device_env.sh
gpu_tests 150 -n 8 tests/portability/test_attention.py tests/test_attention_fused.py tests/hopper/test_attention_schedule.py
grep -q " passed" "$OUT/tests.txt" || { tail -c 600 "$OUT/tests.txt"; exit 1; }
DEVICE_PYTHONPATH=bench WORKLOAD=fused TOOLS="synccheck racecheck memcheck" TOOL_TIMEOUT=60 sh bench/device_sanitize.sh
RUNS="p" sh bench/device_standard_suite.sh
python3 bench/suite_ratios.py "$OUT"/H200-*p.json
FUSED_D=128 FUSED_MODES=fused,fused_vt_rot timeout 100 python3 bench/hopper_tile_sweep.py --only fused \
    --seqs 8192,16384 > "$OUT/fused128.txt" 2>&1
python3 bench/fused_summary.py "$OUT/fused128.txt"
grep -ihE "error|Traceback" "$OUT"/*.txt | head -5
