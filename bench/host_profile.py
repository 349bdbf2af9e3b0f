"""Where the host time of one tiles.attention backward goes (cProfile over 50 calls, after warm-up).

    PYTHONPATH=. python3 bench/host_profile.py [S] [D]
"""
import cProfile
import pstats
import sys
import time

import torch

import tiles

S = int(sys.argv[1]) if len(sys.argv) > 1 else 512
D = int(sys.argv[2]) if len(sys.argv) > 2 else 128
B, H = 16384 // S, 2048 // D
q, k, v, do = (torch.randn(B, S, H, D, device="cuda").bfloat16() for _ in range(4))
xs = [x.detach().requires_grad_() for x in (q, k, v)]
out = tiles.attention(*xs, causal=False)


def step():
    return torch.autograd.grad(out, xs, do, retain_graph=True)


def fwd():
    return tiles.attention(q, k, v, causal=False)


for f in (step, fwd):
    for _ in range(5):
        f()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(50):
        f()
    host = (time.perf_counter() - t0) / 50 * 1e3
    torch.cuda.synchronize()
    print(f"{f.__name__}: host {host:.3f} ms per call")
prof = cProfile.Profile()
prof.enable()
for _ in range(50):
    step()
prof.disable()
torch.cuda.synchronize()
pstats.Stats(prof).sort_stats("tottime").print_stats(25)
