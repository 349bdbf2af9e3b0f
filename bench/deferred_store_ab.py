"""Session 18: the bf16 GEMM's store deferred under the next tile's first k-block (gemm.cu.j2 option
deferred_store) against the kernel tiles.gemm launches, next to torch.matmul (cuBLAS).

    PYTHONPATH=.:bench python3 bench/deferred_store_ab.py [M,N,K ...]

Without the option both consumer warpgroups finish a tile, then store it, and the tensor cores wait for
the store. With it, the finished tile is packed to bf16 in registers (64 a thread beside the next
tile's 128 accumulators) and stored once the next tile's first wgmmas are issued. The launched
configuration is the lowering's own (lower.py gemm_config at the shape); the variant adds only the
option. Its output must equal the launched kernel's to the bit (the same sums; only when the store
runs differs) or it is reported wrong and not timed. Timing: hopper_gemm_tiles.timed (CUDA events
around 20 launches behind a sleep kernel, interleaved rounds, medians, 3 input sets); TFLOP/s and the
ratio to cuBLAS.
"""
import sys

import torch

import tiles
from tiles.backends.hopper import gemm_probe
from tiles.bench.shapes import gemm_shapes

import hopper_gemm_tiles as ht


def launched_config(a, b):
    """The configuration tiles.gemm lowers for a @ b (the backend's launch path: its config, then the
    lowering's notes)."""
    from tiles.kernels.gemm import gemm as gemm_k
    be = tiles.backends.get("hopper")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, dtype=a.dtype, device=a.device)
    low = be.lower(gemm_k, a, b, c, options=gemm_probe._fit_defaults({}, False, c), **be.config("gemm", M=M, N=N, K=K))
    return {k: v for k, v in low.notes["config"].items() if k in gemm_probe.DEFAULTS}


def main(shapes):
    for M, N, K in shapes:
        g = torch.Generator(device="cuda").manual_seed(M + N + K)
        sets = [(torch.randn(M, K, device="cuda", generator=g).bfloat16(),
                 torch.randn(K, N, device="cuda", generator=g).bfloat16()) for _ in range(3)]
        cfg = launched_config(*sets[0])
        vs = {"launched": cfg, "deferred": dict(cfg, deferred_store=True)}
        fns, outs = {"cublas": lambda i: torch.matmul(*sets[i % 3])}, {}
        for name, over in vs.items():
            gos = [gemm_probe.launcher(x, y, **over) for x, y in sets]
            gos[0][1].fill_(float("nan"))
            gos[0][0]()
            outs[name] = gos[0][1].clone()
            fns[name] = lambda i, gos=gos: gos[i % 3][0]()
        torch.cuda.synchronize()
        same = torch.equal(outs["launched"], outs["deferred"])
        ms = ht.timed({n: f for n, f in fns.items() if same or n != "deferred"})
        flops = 2 * M * N * K
        print(M, N, K, {k: cfg[k] for k in ("BN", "stages", "epilogue", "cluster")}, "bitwise:", same, flush=True)
        print("   ", " ".join(f"{n}={flops / (t * 1e-3) / 1e12:.0f}({ms['cublas'] / t:.3f})" for n, t in ms.items()),
              f"deferred/launched={ms['launched'] / ms['deferred']:.3f}" if same else "", flush=True)


if __name__ == "__main__":
    args = [tuple(int(x) for x in s.split(",")) for s in sys.argv[1:]]
    main(args or [(s["M"], s["N"], s["K"]) for s in gemm_shapes("standard")])
