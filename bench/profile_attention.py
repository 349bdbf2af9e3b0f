"""Run one attention shape a few times, for a profiler to catch: tiles on Hopper or SDPA's cuDNN backend,
forward or forward + backward.

    ncu -k regex:attention --launch-skip 3 --launch-count 1 python3 bench/profile_attention.py tiles fwd 1 16 16384 128 0
    python3 bench/profile_attention.py cudnn bwd 4 32 4096 64 0 --table   # kernel times (torch.profiler)
    python3 bench/profile_attention.py tiles bwd 4 16 4096 128 0 --fused   # attention_bwd_fused's backward

Arguments: impl (tiles | cudnn), direction (fwd | bwd), B, H, S, D, causal (0 | 1).
"""
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import tiles

impl, direction = sys.argv[1], sys.argv[2]
B, H, S, D, causal = map(int, sys.argv[3:8])
table = "--table" in sys.argv
if "--fused" in sys.argv:  # FUSED_OPTIONS=a,b turns those schedule options on for it
    from fused_options import use_fused

    use_fused()
g = torch.Generator(device="cuda").manual_seed(0)
q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_(direction == "bwd")
           for _ in range(3))
do = torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16, generator=g)


def step():
    if impl == "tiles":
        o = tiles.attention(q, k, v, causal=bool(causal), backend="hopper")
    else:
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            o = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                                 is_causal=bool(causal)).transpose(1, 2)
    if direction == "bwd":
        o.backward(do)


for _ in range(5):
    step()
torch.cuda.synchronize()
if table:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            step()
        torch.cuda.synchronize()
    for e in sorted(prof.key_averages(), key=lambda e: -e.self_device_time_total)[:8]:
        if e.self_device_time_total > 0:
            print(f"{e.self_device_time_total / 5 / 1e3:9.3f} ms a step  {e.count // 5} a step  {e.key[:110]}")
