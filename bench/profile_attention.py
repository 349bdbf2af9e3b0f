"""Launch one tiles attention forward shape a few times, for a profiler to catch (ncu -k regex:attention_fwd).

    python3 bench/profile_attention.py S D causal
"""
import sys

import torch

import tiles

S, D, causal = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
B, H = 16384 // S, 2048 // D
q, k, v = (torch.randn(B, S, H, D, device="cuda").bfloat16() for _ in range(3))
for _ in range(4):
    tiles.attention(q, k, v, causal=causal, backend="hopper")
torch.cuda.synchronize()
