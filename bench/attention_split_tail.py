"""Session 32: option split_tail (the lowering's split of the persistent walk's last wave, tiles/split.h)
against the launched forward and cuDNN, in the suite's timing, at the standard shapes (B·S = 16k,
H = 16): D = 128 and 64, non-causal, with the launcher's plan and with forced part counts, and causal
with window=False (the heavy-first walk the split cuts) beside the launched pairs' walk.

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_split_tail.py [S ...]
"""
import sys

import torch

import hopper_gemm_tiles as ht
from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
from tiles.kernels import attention_fwd


def launcher(q, k, v, o, lse, causal, extra):
    D, S = q.shape[-1], q.shape[1]
    opts = dict(W.schedule("attention_fwd", D, (q, k, v, o, lse), causal) or {})
    if extra is not None:
        opts.pop("tma_store", None)
        opts.pop("ring_store", None)
        opts.update(extra)
    cfg = W.config("attention_fwd", D=D, causal=causal, Sq=S)
    return W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=causal, D=D, options=opts, **cfg)


def main(seqs):
    H = 16
    for D in (128, 64):
        for causal in (False, True):
            for S in seqs:
                if causal and S not in (4096, 16384):
                    continue
                B = 16384 // S
                sets = []
                for i in range(3):
                    g = torch.Generator(device="cuda").manual_seed(i)
                    q, k, v = (torch.randn(B, S, H, D, device="cuda", generator=g).bfloat16() for _ in range(3))
                    sets.append((q, k, v))
                variants = {"launched": None, "split": {"split_tail": True}}
                if not causal:
                    variants.update({f"split{r}": {"split_tail": r} for r in (2, 3, 4, 5)})
                else:
                    variants["heavy_first"] = {"window": False}
                    variants["split"]["window"] = False
                    variants["split3"] = {"split_tail": 3, "window": False}
                outs, gos = {}, {}
                for name, extra in variants.items():
                    outs[name] = [(torch.empty_like(x[0]), torch.empty(B, H, S, device="cuda")) for x in sets]
                    gos[name] = [launcher(*x, *outs[name][i], causal, extra) for i, x in enumerate(sets)]
                for name in gos:
                    gos[name][0]()
                torch.cuda.synchronize()
                ref_o, ref_l = outs["launched"][0]
                checks = []
                for name in gos:
                    o, l = outs[name][0]
                    checks.append(f"{name}{getattr(gos[name][0], 'split', None) or ''}: "
                                  f"|dO| {(o.float() - ref_o.float()).abs().max().item():.2g} "
                                  f"|dL| {(l - ref_l).abs().max().item():.2g}")
                print(f"D={D} causal={int(causal)} S={S} B={B}: " + "; ".join(checks), flush=True)
                qt = [tuple(t.transpose(1, 2) for t in x) for x in sets]

                def cudnn(i):
                    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
                        torch.nn.functional.scaled_dot_product_attention(*qt[i % 3], is_causal=causal)
                fns = {n: (lambda i, g=g: g[i % 3]()) for n, g in gos.items()}
                fns["sdpa_cudnn"] = cudnn
                flops = 4 * B * H * S * S * D // (2 if causal else 1)
                ms = ht.suite_timed(fns, 3, reps=25, budget_s=6.0)
                print("  suite: " + " ".join(f"{n}={flops / (t * 1e-3) / 1e12:.0f}({ms['launched'] / t:.3f})"
                                             for n, t in ms.items())
                      + f"  | best split over cuDNN {ms['sdpa_cudnn'] / min(t for n, t in ms.items() if n.startswith('split')):.3f}"
                      f", launched over cuDNN {ms['sdpa_cudnn'] / ms['launched']:.3f}", flush=True)


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1:]] or [1024, 4096, 8192, 16384])
