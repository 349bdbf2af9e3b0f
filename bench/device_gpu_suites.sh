# Sourced by the closing device scripts: the GPU's state, then the GPU test suites (every backend the
# machine has; the CDNA emulator on the H200), summary lines printed, the whole log in $OUT/tests.txt.
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
timeout 220 python3 -m pytest -q -p no:cacheprovider -n 8 -W ignore tests/cdna_emu tests/portability tests/hopper \
    tests/test_attention_fused.py tests/test_gemm_fp8.py -rfs --tb=short > "$OUT/tests.txt" 2>&1
grep -E "^(FAILED|ERROR|XFAIL)|passed|failed" "$OUT/tests.txt" | cut -c1-200 | head -30
