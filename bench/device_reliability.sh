#!/bin/sh
# The GPU half of the reliability issue, in one device call: the > 2^31-element and CUDA-graph tests,
# the four compute-sanitizer tools over every suite kernel (bench/sanitize_suite.py), and the initcheck
# experiment that explains the GEMM's reports (bench/initcheck_tma.py). Usage: sh bench/device_reliability.sh
. bench/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
compute-sanitizer --version | tail -1 | tee -a "$OUT/gpu.txt"
python3 -m pytest -q -p no:cacheprovider -W ignore tests/hopper/test_large_index.py tests/hopper/test_graph_capture.py \
    -rs 2>&1 | tail -8 | tee "$OUT/gpu_tests.txt"
python3 bench/sanitize_suite.py 2>&1 | tail -2  # warm the kernel cache outside the sanitizers
for tool in memcheck racecheck synccheck initcheck; do
    echo "== $tool" | tee -a "$OUT/sanitizer.txt"
    compute-sanitizer --tool $tool --report-api-errors no --print-limit 2 python3 bench/sanitize_suite.py 2>&1 \
        | grep -E "ERROR SUMMARY|sanitize_suite:|Uninitialized|Invalid|Race|Barrier" | sort | uniq -c | head -12 \
        | tee -a "$OUT/sanitizer.txt"
done
for ep in tma regs; do
    echo "== initcheck, gemm epilogue=$ep" | tee -a "$OUT/sanitizer.txt"
    compute-sanitizer --tool initcheck --report-api-errors no --print-limit 1 python3 bench/initcheck_tma.py $ep 2>&1 \
        | grep -E "ERROR SUMMARY|initcheck_tma:|Uninitialized" | head -4 | tee -a "$OUT/sanitizer.txt"
done
