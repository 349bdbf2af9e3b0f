#!/bin/sh
# The short closing device call of a session: the quick benchmark (gemm, attention forward) and the
# four compute-sanitizer tools over bench/sanitize_suite.py.
export PYTHONPATH=. PYTHONUNBUFFERED=1 TILES_CACHE_DIR=/tmp/tiles-cache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m tiles.bench run --suite quick --kernels gemm,attention_fwd --reps 20 --budget 0.4 \
    --out "$OUT/H200-$(date +%F).json" 2>&1 | tail -40
for tool in memcheck racecheck synccheck initcheck; do
    echo "== $tool"
    compute-sanitizer --tool $tool --report-api-errors no --print-limit 3 python3 bench/sanitize_suite.py 2>&1 | tail -8
done
