#!/bin/sh
# Session 12's closing device call: the GPU test suites (hopper, portability incl. the fused backward,
# cdna-emu), then the standard benchmark with compile and cached-load times.
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 8 -W ignore tests/cdna_emu tests/portability tests/hopper \
    tests/test_attention_fused.py -rfs --tb=short > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.txt" | cut -c1-200 | head -30
python3 -m pytest -q -p no:cacheprovider -W ignore tests/portability/test_attention.py -k "fused and hopper" 2>&1 | tail -2
python3 -m tiles.bench run --suite standard --kernels gemm,gemm_fp8,attention_fwd,attention_bwd --reps 10 \
    --budget 0.25 --out "$OUT/H200-$(date +%F).json" > "$OUT/bench.txt" 2>&1
tail -3 "$OUT/bench.txt"
