#!/bin/sh
# Session 26, fifth call: where the launched fp8 GEMM stalls against its l1 bound (scale loads hoisted
# out of the loop), instruction by instruction (ncu SourceCounters, bench/ncu_hotspots.py), at
# 6144 x 1536 x 7168 (192 x 128 tiles, 1.12x apart) and 1024 x 1536 x 7168 (128 x 96, 1.11x apart).
#   TILES_COMMIT=<commit> sh bench/device_session26e.sh
DEVICE_PYTHONPATH=bench
. bench/device_env.sh
. bench/ncu_hot.sh
export HOT_ROWS=24
hot bm192_launched "regex:gemm_fp8" bench/profile_fp8.py edit:launched 6144 1536 7168
hot bm192_l1 "regex:gemm_fp8" bench/profile_fp8.py edit:l1 6144 1536 7168
hot bn96_launched "regex:gemm_fp8" bench/profile_fp8.py edit:launched 1024 1536 7168
hot bn96_l1 "regex:gemm_fp8" bench/profile_fp8.py edit:l1 1024 1536 7168
