#!/bin/sh
# Session 20's closing call (about 550 s of device time were left): the GPU test suites,
# compute-sanitizer synccheck / racecheck / memcheck over the fused workload (the D = 64 fused
# backward, persistent, 256 programs on 132 SMs, beside D = 128's), then the standard suite once, with
# tiles.attention's backward fused at D = 64 from 1k queries.
#   TILES_COMMIT=<commit> sh bench/device_session20_final.sh
# with <commit> typed in from the checkout that sends the tree (`git rev-parse --short HEAD` there).
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
timeout 170 python3 -m pytest -q -p no:cacheprovider -n 8 -W ignore tests/cdna_emu tests/portability tests/hopper \
    tests/test_attention_fused.py tests/test_gemm_fp8.py -rfs --tb=short > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | cut -c1-200 | head -20
DEVICE_PYTHONPATH=bench WORKLOAD=fused TOOLS="synccheck racecheck memcheck" TOOL_TIMEOUT=40 sh bench/device_sanitize.sh
RUNS="k" sh bench/device_standard_suite.sh
python3 - "$OUT"/H200-*k.json <<'PY'
import json, math, sys
rows = json.load(open(sys.argv[1]))["rows"]
by = {}
for r in rows:
    if r["kernel"] == "attention_bwd":
        s = r["shape"]
        by.setdefault((s["D"], s["causal"], s["S"], s["B"], s["H"], s.get("H_kv")), {})[r["impl"]] = r["ms"]
for k, v in sorted(by.items()):
    if "tiles" in v and "sdpa_cudnn" in v:
        print("bwd D=%d causal=%d S=%d B=%d H=%d Hkv=%s" % k, "tiles/cudnn %.3f" % (v["sdpa_cudnn"] / v["tiles"]))
PY
