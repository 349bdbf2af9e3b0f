#!/bin/sh
# The closing device call of a session: the portability suite on every backend the GPU runs (hopper,
# and cdna-emu for gfx942 and gfx950 with the emulator's planted-bug tests), then the standard benchmark
# (gemm, gemm_fp8, attention forward and backward; compile and cached-load times from empty caches).
. bench/device_env.sh
N=""; python3 -c "import xdist" 2>/dev/null && N="-n 8"
python3 -m pytest -q -p no:cacheprovider $N -W ignore tests/cdna_emu tests/portability -rfs --tb=short \
    > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | cut -c1-200 | head -40
python3 -m tiles.bench run --suite standard --kernels gemm,gemm_fp8,attention_fwd,attention_bwd --reps 10 \
    --budget 0.25 --out "$OUT/H200-$(date +%F).json" > "$OUT/bench.txt" 2>&1
tail -4 "$OUT/bench.txt"
