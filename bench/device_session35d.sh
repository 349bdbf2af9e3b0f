#!/bin/sh
# Session 35, fourth call: the fp8 operands' K-major copies in 16-byte vectors, both in one launch
# (transpose.py, templates/transpose_bytes.cu). Their GPU tests (awkward shapes and alignments, the
# challenge layout through tiles.gemm_fp8 to the bit), their bandwidth (bench/transpose_bw.py), then the
# standard suite's fp8 rows (zv: tiles_kmajor_copy is the transposed layout with its copies).
#   TILES_COMMIT=<commit> sh bench/device_session35d.sh
DEVICE_PYTHONPATH=bench:tests/hopper
. bench/device_env.sh
gpu_tests 150 tests/hopper/test_transpose.py tests/hopper/test_fp8_rowwise.py -k "not compile"
timeout 100 python3 bench/transpose_bw.py 2>&1 | grep -v Warning
timeout 200 python3 -m tiles.bench run --suite standard --kernels gemm_fp8 --reps 10 --budget 0.25 \
    --out "$OUT/H200-$(date +%F)zv.json" > "$OUT/bench_zv.txt" 2>&1
tail -1 "$OUT/bench_zv.txt"
python3 bench/suite_ratios.py "$OUT"/H200-*zv.json
