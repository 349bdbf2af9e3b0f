#!/bin/sh
# Session 37, last call: ops.h `store` now writes an f32 accumulator into a 16-bit shared tile four pairs
# a stmatrix (the GEMM, fp8 and attention epilogues through TMA): the GPU suites, the forward's staged O
# against a pair an st.shared (bench/attention_stsm.py), then the standard suite. (Run at c8a5003; since
# f423814 only ring_store's staged O takes that form, ops.h store_stmatrix: the D = 64 forward lost with it.)
#   TILES_COMMIT=<c> RUN=<name> sh bench/device_session37d.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
gpu_tests 300 -n 8 tests/cdna_emu tests/portability tests/hopper tests/test_attention_fused.py tests/test_gemm_fp8.py
timeout 120 python3 bench/attention_stsm.py 2>&1 | grep -v Warning
RUNS="${RUN:-a}" sh bench/device_standard_suite.sh
for run in ${RUN:-a}; do PYTHONPATH=. python3 bench/suite_ratios.py "$OUT"/H200-*"$run".json | grep -E "geomean|D128|8192x8192x8192"; done
