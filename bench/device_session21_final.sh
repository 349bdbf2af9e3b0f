#!/bin/sh
# Session 21's closing call: the GPU test suites, compute-sanitizer synccheck / racecheck / memcheck
# over the fused workload (the D = 64 fused backward as launched now: not rotated, dS by stmatrix,
# persistent over 256 programs, beside D = 128's), then the standard suite once, with tiles.attention's
# D = 64 backward fused from 512 queries.
#   TILES_COMMIT=<commit> sh bench/device_session21_final.sh
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
timeout 170 python3 -m pytest -q -p no:cacheprovider -n 8 -W ignore tests/cdna_emu tests/portability tests/hopper \
    tests/test_attention_fused.py tests/test_gemm_fp8.py -rfs --tb=short > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | cut -c1-200 | head -20
DEVICE_PYTHONPATH=bench WORKLOAD=fused TOOLS="synccheck racecheck memcheck" TOOL_TIMEOUT=40 sh bench/device_sanitize.sh
RUNS="m" sh bench/device_standard_suite.sh
python3 - "$OUT"/H200-*m.json <<'PY'
import json, math, sys
rows = json.load(open(sys.argv[1]))["rows"]
by = {}
for r in rows:
    if "shape" in r and r["kernel"].startswith("attention"):
        s = r["shape"]
        by.setdefault((r["kernel"], s["D"], s["causal"], s["S"], s["B"], s["H"], s.get("H_kv")), {})[r["impl"]] = r["ms"]
for kern in ("attention_fwd", "attention_bwd"):
    g = []
    for k, v in sorted(by.items()):
        if k[0] == kern and "tiles" in v and "sdpa_cudnn" in v:
            g.append(v["sdpa_cudnn"] / v["tiles"])
            print("%s D=%d causal=%d S=%d B=%d H=%d Hkv=%s" % k, "tiles/cudnn %.3f" % g[-1])
    print(kern, "geomean %.3f over %d" % (math.exp(sum(map(math.log, g)) / len(g)), len(g)))
PY
