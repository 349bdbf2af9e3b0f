"""Session 18: the bf16 GEMM's store deferred under the next tile's first k-block (gemm.cu.j2 option
deferred_store) against the kernel tiles.gemm launches, next to torch.matmul (cuBLAS).

    PYTHONPATH=.:bench python3 bench/deferred_store_ab.py [--suite] [--variants NAME,...] [M,N,K ...]

Without the option both consumer warpgroups finish a tile, then store it, and the tensor cores wait for
the store. With it, the finished tile is packed to bf16 in registers (64 a thread beside the next
tile's 128 accumulators) and stored once the next tile's first wgmmas are issued. The launched
configuration is the lowering's own (lower.py gemm_config at the shape); the variant adds only the
option. Its output must equal the launched kernel's to the bit (the same sums; only when the store
runs differs) or it is reported wrong and not timed. Timing: hopper_gemm_tiles.timed (CUDA events
around 20 launches behind a sleep kernel, interleaved rounds, medians, 3 input sets); TFLOP/s and the
ratio to cuBLAS. With --suite the timing is the standard suite's instead (tiles.bench.run:
one launch at a time behind the sleep kernel, input sets rotated so that consecutive launches miss in
L2, every variant once a rep, medians), the regime the result files are measured in.

Variants past the deferred store (--variants): plain (neither the deferred store nor group 16:
the launched form before session 18), g4, g12, g16, g24, g32 (group_m: tile rows visited
together), each alone and with the deferred store (ds_g16, ...).
"""
import sys

import torch

import tiles
from tiles.backends.hopper import gemm_probe
from tiles.bench import run as bench_run
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


VARIANTS = {"deferred": dict(deferred_store=True), "plain": dict(deferred_store=False, group_m=8),
            **{f"g{g}": dict(group_m=g) for g in (4, 12, 16, 24, 32)},
            **{f"ds_g{g}": dict(deferred_store=True, group_m=g) for g in (4, 12, 16, 24, 32)}}


def main(shapes, variants=("deferred",), suite=False):
    for M, N, K in shapes:
        g = torch.Generator(device="cuda").manual_seed(M + N + K)
        n_sets = bench_run._n_sets(2 * (M * K + K * N + M * N), torch.device("cuda")) if suite else 3
        sets = [(torch.randn(M, K, device="cuda", generator=g).bfloat16(),
                 torch.randn(K, N, device="cuda", generator=g).bfloat16()) for _ in range(n_sets)]
        cfg = launched_config(*sets[0])
        vs = {"launched": cfg, **{v: dict(cfg, **VARIANTS[v]) for v in variants}}
        fns, outs = {"cublas": lambda i: torch.matmul(*sets[i % n_sets])}, {}
        for name, over in vs.items():
            gos = [gemm_probe.launcher(x, y, **over) for x, y in sets]
            gos[0][1].fill_(float("nan"))
            gos[0][0]()
            outs[name] = gos[0][1].clone()
            fns[name] = lambda i, gos=gos: gos[i % n_sets][0]()
        torch.cuda.synchronize()
        same = {n: torch.equal(outs["launched"], o) for n, o in outs.items()}
        fns = {n: f for n, f in fns.items() if same.get(n, True)}
        ms = ht.suite_timed(fns, n_sets) if suite else ht.timed(fns)
        flops = 2 * M * N * K
        print(M, N, K, {k: cfg[k] for k in ("BN", "stages", "epilogue", "cluster")}, "bitwise:",
              {n: v for n, v in same.items() if n != "launched"}, flush=True)
        print("   ", " ".join(f"{n}={flops / (t * 1e-3) / 1e12:.0f}({ms['cublas'] / t:.3f})" for n, t in ms.items()),
              " ".join(f"{n}/launched={ms['launched'] / ms[n]:.3f}" for n in ms if n not in ("cublas", "launched")),
              flush=True)


if __name__ == "__main__":
    argv = sys.argv[1:]
    suite = "--suite" in argv
    variants = ("deferred",)
    if "--variants" in argv:
        variants = tuple(argv[argv.index("--variants") + 1].split(","))
        del argv[argv.index("--variants"):argv.index("--variants") + 2]
    args = [tuple(int(x) for x in a.split(",")) for a in argv if a != "--suite"]
    main(args or [(s["M"], s["N"], s["K"]) for s in gemm_shapes("standard")], variants, suite)
