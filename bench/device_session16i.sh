#!/bin/sh
# Session 16, last call: where the weakest kernels stall, instruction by instruction, for the next
# session (ncu SourceCounters, bench/ncu_hotspots.py): dK/dV and dQ at D = 64, S = 4k (the backward's
# largest gap to cuDNN), and the fp8 GEMM at 1024 x 1536 x 7168 (0.87x row-wise _scaled_mm) with
# _scaled_mm beside it.
#   sh bench/device_session16i.sh
DEVICE_PYTHONPATH=tests/hopper:bench
. bench/device_env.sh
. bench/ncu_hot.sh
hot dkdv64 "regex:dkdv" bench/profile_attention.py tiles bwd 4 32 4096 64 0
hot dq64 "regex:bwd_dq" bench/profile_attention.py tiles bwd 4 32 4096 64 0
hot fp8_small "regex:gemm_fp8" bench/profile_fp8.py tiles 1024 1536 7168
hot fp8_small_rowwise "regex:gemm|sm90|cutlass" bench/profile_fp8.py scaled_mm 1024 1536 7168
