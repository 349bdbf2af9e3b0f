"""Launch one fp8 GEMM a few times, for a profiler to catch: tiles.gemm_fp8 or torch._scaled_mm row-wise.

    ncu -k regex:gemm_fp8 --launch-skip 3 --launch-count 1 python3 bench/profile_fp8.py tiles 8192 8192 8192
"""
import sys

import torch

import tiles
from tiles.bench import fp8

impl, M, N, K = sys.argv[1], *map(int, sys.argv[2:5])
x = fp8.make_set(M, N, K, torch.device("cuda"), 0)
for _ in range(5):
    if impl == "tiles":
        tiles.gemm_fp8(x["a"], x["b"], x["sa"], x["sb"], backend="hopper")
    else:
        torch._scaled_mm(x["a"], x["b"].t(), scale_a=x["sa_row"], scale_b=x["sb_row"], out_dtype=torch.bfloat16)
torch.cuda.synchronize()
