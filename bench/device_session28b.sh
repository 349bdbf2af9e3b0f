#!/bin/sh
# Session 28, second call: compute-sanitizer memcheck over the fp8 workload with its log kept (the first
# call counted 34 errors), bench/fp8_ab.py stma (192 x 128 tiles against the 128 x 256 shapes' launched
# ones), then ncu hot spots of 1024 x 4608 x 7168's 128 x 128 stream-K tiles, scales by TMA and by loads.
#   TILES_COMMIT=<commit> sh bench/device_session28b.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
. bench/ncu_hot.sh
timeout 150 compute-sanitizer --tool memcheck --print-limit 40 python3 bench/sanitize_suite.py --only gemm_fp8 > "$OUT/memcheck.txt" 2>&1
grep -E "ERROR SUMMARY|^=========  *(Invalid|Address|at |by thread|Saved host)" "$OUT/memcheck.txt" | sort | uniq -c | sort -rn | head -24
grep -m1 -B2 -A14 "Invalid" "$OUT/memcheck.txt" | cut -c1-200
timeout 150 python3 bench/fp8_ab.py stma 2>&1 | grep -v "^    bitwise vs launched" | tail -10
HOT_ROWS=12 hot stma_sk regex:gemm_fp8 bench/profile_fp8.py ab:stma:stma 1024 4608 7168
HOT_ROWS=12 hot global_sk regex:gemm_fp8 bench/profile_fp8.py ab:stma:global 1024 4608 7168
