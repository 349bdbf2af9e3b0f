#!/bin/sh
# Session 12's closing device call: the GPU test suites (hopper, portability, cdna-emu), the fp8 GEMM
# correctness cases at the issue shapes (BN=256 with ping-pong is now the launcher's choice there), the
# backward's extra correctness checks (dQ now two consumer warpgroups), then the standard benchmark.
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1 TILES_CACHE_DIR=/tmp/tiles-cache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 -W ignore tests/cdna_emu tests/portability tests/hopper \
    -rfs --tb=short > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | cut -c1-200 | head -30
timeout 150 python3 bench/hopper_gemm_fp8_check.py > "$OUT/fp8_check.txt" 2>&1
grep -E "FAIL|fail|ok|error" "$OUT/fp8_check.txt" | tail -8
timeout 60 python3 bench/hopper_attention_bwd_check.py --phases check 2>&1 | tail -6
python3 -m tiles.bench run --suite standard --kernels gemm,gemm_fp8,attention_fwd,attention_bwd --reps 10 \
    --budget 0.25 --out "$OUT/H200-$(date +%F).json" > "$OUT/bench.txt" 2>&1
tail -4 "$OUT/bench.txt"
