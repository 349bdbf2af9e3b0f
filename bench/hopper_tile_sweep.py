"""One device call that sweeps the tile sizes the Hopper backend leaves open for the attention backward
kernels (prep, dK/dV, dQ), the forward at short sequences, and layernorm's rows per block.

    PYTHONUNBUFFERED=1 PYTHONPATH=. TILES_CACHE_DIR=/tmp/tc python3 bench/hopper_tile_sweep.py [--only bwd,fwd,ln]

Every variant is launched from prepared arguments on the same inputs as the default and its output is
compared with the default's (the defaults themselves are checked against float64 by the portability
suite): a variant whose output differs by more than 2 % of the output's largest value is reported
wrong and not timed. Times: CUDA events, interleaved rounds over 3 input sets, medians
(`hopper_attention_check._time_batch`). Rows go to $OUT/tile_sweep.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

OUT = os.environ.get("OUT", "/tmp/hopper_out")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
from hopper_attention_check import _time_batch  # noqa: E402

# name -> (constexpr overrides, lowering options); "base" is what the backend picks today
DQ = {"base": ({}, {}), "m128n64": ({"BM": 128, "BN": 64}, {}), "m128n64pp": ({"BM": 128, "BN": 64}, {"pingpong": True}),
      "m128n128": ({"BM": 128, "BN": 128}, {}), "m192n64": ({"BM": 192, "BN": 64}, {}), "m64n64": ({"BM": 64, "BN": 64}, {})}
DKDV = {"base": ({}, {}), "m128": ({"BM": 128}, {}), "n192": ({"BN": 192}, {}), "pp": ({}, {"pingpong": True}),
        "m32": ({"BM": 32}, {}), "n192m32": ({"BN": 192, "BM": 32}, {})}
PREP = {"base": {}, "m128": {"BM": 128}, "m256": {"BM": 256}, "m16": {"BM": 16}}
FWD = {"base": ({}, {}), "np": ({}, {"persistent": False}), "bn64": ({"BN": 64}, {}), "st2": ({}, {"stages": 2}),
       "nopp": ({}, {"pingpong": False}),
       "bm128": ({"BM": 128}, {}), "bm128n64": ({"BM": 128, "BN": 64}, {})}  # session 13: D = 64 with two consumer warpgroups taking turns (BM = 192 is its default)
LN = {"base": {}, "m2": {"BM": 2}}  # m2 at 8 values a thread = the layout of the BM=2 default before


def record(**row):
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "tile_sweep.json"), "a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)


def _close(x, ref) -> bool:
    import torch
    x, ref = x.float(), ref.float()
    return bool(torch.isfinite(x).all()) and float((x - ref).abs().max()) <= 0.02 * float(ref.abs().max()) + 1e-6


def _sweep(tag, shape, flops, variants, make, outs_of):
    """make(variant, set index) -> zero-argument launch; outs_of(set index) -> output tensors to compare."""
    import torch
    fns, ok = {}, {}
    for name in variants:
        try:
            gos = [make(name, i) for i in range(3)]
        except Exception as e:  # a variant the lowering refuses
            record(kind=tag, **shape, variant=name, error=repr(e)[:300])
            continue
        for t in outs_of(0):  # a program a variant leaves out must not find the last variant's answer
            t.fill_(float("nan"))
        gos[0]()
        torch.cuda.synchronize()
        got = [t.clone() for t in outs_of(0)]
        if name == "base":
            base = got
        ok[name] = all(_close(g, b) for g, b in zip(got, base))
        if ok[name]:
            fns[name] = lambda i, gos=gos: gos[i % 3]()
    for f in fns.values():
        for i in range(3):
            f(i)
    torch.cuda.synchronize()
    ms = _time_batch(fns, rounds=7, inner=5)
    for name in ok:
        t = ms.get(name)
        record(kind=tag, **shape, variant=name, correct=ok[name], ms=t,
               tflops=None if t is None or not flops else flops / (t * 1e-3) / 1e12,
               vs_base=None if t is None else ms["base"] / t)


def bwd(seqs="1024,4096"):
    import torch
    from tiles import backends
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.kernels import attention_bwd_dkdv, attention_bwd_dq, attention_bwd_prep, attention_fwd
    for D in (128, 64):
        for causal in (False, True):
            for S in map(int, seqs.split(",")):
                B, H = 16384 // S, 2048 // D
                shape = dict(D=D, causal=causal, S=S, B=B, H=H)
                f5 = 4 * B * H * S * S * D / (2 if causal else 1)  # one S x S x D GEMM pair = 2 · 2BHS²D
                sets = []
                for i in range(3):
                    g = torch.Generator(device="cuda").manual_seed(i)
                    q, k, v, do = (torch.randn(B, S, H, D, device="cuda", generator=g).bfloat16() for _ in range(4))
                    o = torch.empty_like(q)
                    lse = torch.empty(B, H, S, device="cuda")
                    W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=causal, D=D)()
                    sets.append(dict(q=q, k=k, v=v, do=do, o=o, lse=lse, delta=torch.empty(B, H, S, device="cuda"),
                                     dq=torch.empty_like(q), dk=torch.empty_like(k), dv=torch.empty_like(v)))
                hop = backends.get("hopper")

                def prep(name, i):
                    s = sets[i]
                    kw = dict(D=D, **PREP[name])
                    return lambda: hop.launch(attention_bwd_prep, s["o"], s["do"], s["delta"], **kw)
                _sweep("prep", shape, 0, PREP, prep, lambda i: [sets[i]["delta"]])
                for s in sets:  # Delta from the default prep for the kernels below
                    hop.launch(attention_bwd_prep, s["o"], s["do"], s["delta"], D=D)

                def dkdv(name, i):
                    s, (over, opts) = sets[i], DKDV[name]
                    return W.prepare(attention_bwd_dkdv, s["q"], s["k"], s["v"], s["do"], s["lse"], s["delta"],
                                     s["dk"], s["dv"], D ** -0.5, causal=causal, D=D, options=opts, **over)
                _sweep("dkdv", shape, 2 * f5, DKDV, dkdv, lambda i: [sets[i]["dk"], sets[i]["dv"]])

                def dq(name, i):
                    s, (over, opts) = sets[i], DQ[name]
                    return W.prepare(attention_bwd_dq, s["q"], s["k"], s["v"], s["do"], s["lse"], s["delta"],
                                     s["dq"], D ** -0.5, causal=causal, D=D, options=opts, **over)
                _sweep("dq", shape, 1.5 * f5, DQ, dq, lambda i: [sets[i]["dq"]])
                sets.clear()
                torch.cuda.empty_cache()


def fwd(only=None, dims=(128, 64)):
    import torch
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.kernels import attention_fwd
    variants = {n: v for n, v in FWD.items() if not only or n in only}
    for D in dims:
        for causal in (False, True):
            for S in (512, 1024, 2048, 4096):
                B, H = 16384 // S, 2048 // D
                shape = dict(D=D, causal=causal, S=S, B=B, H=H)
                sets = []
                for i in range(3):
                    g = torch.Generator(device="cuda").manual_seed(i)
                    q, k, v = (torch.randn(B, S, H, D, device="cuda", generator=g).bfloat16() for _ in range(3))
                    sets.append((q, k, v, torch.empty_like(q), torch.empty(B, H, S, device="cuda")))

                def make(name, i):
                    q, k, v, o, lse = sets[i]
                    over, opts = variants[name]
                    return W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=causal, D=D,
                                     options=opts, **{**W.config("attention_fwd", D=D), **over})
                _sweep("fwd", shape, 4 * B * H * S * S * D / (2 if causal else 1), variants, make,
                       lambda i: [sets[i][3], sets[i][4]])
                sets.clear()
                torch.cuda.empty_cache()


def ln():
    import torch
    from tiles import backends
    from tiles.backends.hopper.lower_simt import LayerNormLowering
    from tiles.kernels import layernorm
    hop = backends.get("hopper")
    for M, N in ((16384, 4096), (16384, 8192), (65536, 1024)):
        xs = [torch.randn(M, N, device="cuda").bfloat16() for _ in range(3)]
        w, b = torch.randn(N, device="cuda").bfloat16(), torch.randn(N, device="cuda").bfloat16()
        ys = [torch.empty_like(x) for x in xs]
        NP = 1 << (N - 1).bit_length()

        def make(name, i):
            kw = {**LayerNormLowering.config(N=N), **LN[name]}
            return lambda: hop.launch(layernorm, xs[i], w, b, ys[i], 1e-5, NP=NP, **kw)
        _sweep("layernorm", dict(M=M, N=N), 0, LN, make, lambda i: [ys[i]])


def autograd():
    """The whole backward through autograd (prep + dK/dV + dQ as tiles.attention launches them) with
    the backend's tile choices of today vs those of before the sweep (dQ BM=64, prep BM=64): GPU time
    by events and the host time to issue one backward."""
    import time
    import torch
    import tiles
    from tiles.backends.hopper import lower_attention, lower_simt
    W, Simt = lower_attention.WarpSpecializedLowering, lower_simt.SimtLowering
    today = (W.config, W.SCHEDULES, Simt.config)
    before = (classmethod(lambda cls, kernel=None, D=None, **p: {"BM": 192} if kernel == "attention_fwd" and D == 64 else {}),
              {}, classmethod(lambda cls, kernel=None, **p: {}))
    for D in (128, 64):
        for causal in (False, True):
            for S in (512, 1024, 4096):
                B, H = 16384 // S, 2048 // D
                g = torch.Generator(device="cuda").manual_seed(0)
                q, k, v, do = (torch.randn(B, S, H, D, device="cuda", generator=g).bfloat16() for _ in range(4))
                xs = [x.detach().requires_grad_() for x in (q, k, v)]
                out = tiles.attention(*xs, causal=causal, backend="hopper")
                fns = {}
                for name, (cfg, sch, scfg) in (("today", today), ("before", before)):
                    def f(i, cfg=cfg, sch=sch, scfg=scfg):
                        W.config, W.SCHEDULES, Simt.config = cfg, sch, scfg
                        return torch.autograd.grad(out, xs, do, retain_graph=True)
                    fns[name] = f
                for f in fns.values():
                    f(0)
                torch.cuda.synchronize()
                ms = _time_batch(fns, rounds=7, inner=5)
                host = {}
                for name, f in fns.items():
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    for i in range(10):
                        f(i)
                    host[name] = (time.perf_counter() - t0) / 10 * 1e3
                    torch.cuda.synchronize()
                W.config, W.SCHEDULES, Simt.config = today
                record(kind="autograd", D=D, causal=causal, S=S, ms=ms, host_ms=host)


def fused(seqs="1024,4096,16384"):
    """The backward through autograd at D = 128: the split kernels (prep, dK/dV, dQ) vs
    attention_bwd_fused (prep, then dK/dV with dQ added by TMA reduce) as scheduled by default (one
    CTA per program, dK's wgmma issued right after dQ's) and rotated (dK's wgmma issued under the next
    block's softmax, dQ waited for at once). Outputs of each are compared with the split path's."""
    import torch
    import tiles
    from tiles.backends.hopper import backend as hb, lower_attention
    W, HB = lower_attention.WarpSpecializedLowering, hb.HopperBackend
    fused0, fused_d0, schedules = HB.FUSED_BACKWARD, HB.FUSED_BACKWARD_D, dict(W.SCHEDULES)
    fdef = schedules[("attention_bwd_fused", 128)]
    modes = {
        "split": (False, schedules),
        "fused": (True, schedules),
        "fused_rotated": (True, {**schedules, ("attention_bwd_fused", 128): {"persistent": False}}),
        # session 13: the two consumer warpgroups taking turns on the tensor cores
        "fused_pp": (True, {**schedules, ("attention_bwd_fused", 128): {"persistent": False, "rotate": False,
                                                                         "pingpong": True}}),
        "fused_pprot": (True, {**schedules, ("attention_bwd_fused", 128): {"persistent": False, "pingpong": True}}),
        # session 16: as session 12 left it (one dS copy and two barriers a block, the reduce issued by a
        # consumer thread, LSE and Delta loaded at their block), and today's changes alone and together
        "fused_s12": (True, {**schedules, ("attention_bwd_fused", 128): {**fdef, "ds_stages": 1, "reducer": False,
                                                                          "prefetch": False}}),
    }
    for name, over in (("nopf", {"prefetch": False}), ("ds1", {"ds_stages": 1}), ("nored", {"reducer": False}),
                       ("uni", {"uniform_warpgroup": True}), ("uni_nopf", {"uniform_warpgroup": True, "prefetch": False}),
                       ("uni_rot_nopf", {"uniform_warpgroup": True, "rotate": True, "prefetch": False}),
                       ("uni_pprot_nopf", {"uniform_warpgroup": True, "rotate": True, "pingpong": True, "prefetch": False}),
                       ("uni_pp_nopf", {"uniform_warpgroup": True, "pingpong": True, "prefetch": False}),
                       ("uni_nopf_s2", {"uniform_warpgroup": True, "prefetch": False, "stages": 2}),
                       ("uni_ds1_nopf", {"uniform_warpgroup": True, "prefetch": False, "ds_stages": 1}),
                       ("nsm", {"stmatrix": False}),
                       # session 22: LSE and Delta into the ring stages by the producer's TMA
                       ("vt", {"vec_tma": True}), ("novt", {"vec_tma": False}),
                       ("vt_rot", {"vec_tma": True, "rotate": True})):
        modes["fused_" + name] = (True, {**schedules, ("attention_bwd_fused", 128): {**fdef, **over}})
    D = int(os.environ.get("FUSED_D", 128))
    if D == 64:  # session 19: dQ as each warpgroup's share of the sum over its keys (split_k)
        key = ("attention_bwd_fused", 64)
        base = dict(schedules[key])  # persistent (session 20), not rotated (session 21)
        modes = {"split": (False, schedules)}
        for name, over in (("fused", {}), ("fused_np", {"persistent": False}), ("fused_rot", {"rotate": True}),
                           ("fused_pp", {"pingpong": True}), ("fused_pp_rot", {"pingpong": True, "rotate": True}),
                           ("fused_pp_rot_peel", {"pingpong": True, "rotate": True, "peel": True}),
                           ("fused_ds1", {"ds_stages": 1}), ("fused_rot_ds1", {"rotate": True, "ds_stages": 1}),
                           ("fused_nsm", {"stmatrix": False}),  # session 21: dS a pair a st.shared
                           ("fused_vt", {"vec_tma": True}),  # session 22: LSE and Delta by TMA (launched:
                           ("fused_novt", {"vec_tma": False}),  # non-causal only)
                           ("fused_vt_rot", {"vec_tma": True, "rotate": True})):
            modes[name] = (True, {**schedules, key: {**base, **over}})
    if os.environ.get("FUSED_MODES"):  # a subset, by name (split always)
        keep = set(os.environ["FUSED_MODES"].split(",")) | {"split"}
        modes = {n: m for n, m in modes.items() if n in keep}
    for causal in (False, True):
        gqa = [(4096, 64, 8)] * (D == 128 and os.environ.get("FUSED_GQA", "1") == "1")
        for S, H, Hkv in [(int(x), 2048 // D, 2048 // D) for x in seqs.split(",")] + gqa:
            B = 16384 // S
            g = torch.Generator(device="cuda").manual_seed(0)
            q, do = (torch.randn(B, S, H, D, device="cuda", generator=g).bfloat16() for _ in range(2))
            k, v = (torch.randn(B, S, Hkv, D, device="cuda", generator=g).bfloat16() for _ in range(2))
            xs = [x.detach().requires_grad_() for x in (q, k, v)]
            out = tiles.attention(*xs, causal=causal, backend="hopper")
            fns, grads = {}, {}
            for name, (fuse, sch) in modes.items():
                def f(i, fuse=fuse, sch=sch):
                    HB.FUSED_BACKWARD, HB.FUSED_BACKWARD_D, W.SCHEDULES = fuse, {(64, c): 0 for c in (False, True)} if fuse else {}, sch
                    return torch.autograd.grad(out, xs, do, retain_graph=True)
                grads[name] = [x.float() for x in f(0)]
                fns[name] = f
            ok = {n: all(float((a - b).abs().max()) <= 0.02 * float(b.abs().max()) for a, b in zip(gr, grads["split"]))
                  for n, gr in grads.items()}
            torch.cuda.synchronize()
            ms = _time_batch(fns, rounds=7, inner=5)
            HB.FUSED_BACKWARD, HB.FUSED_BACKWARD_D, W.SCHEDULES = fused0, fused_d0, schedules
            flops = 2.5 * 4 * B * H * S * S * D / (2 if causal else 1)
            record(kind="fused", D=D, causal=causal, S=S, H=H, Hkv=Hkv, ms=ms, ok=ok,
                   tflops={n: flops / (t * 1e-3) / 1e12 for n, t in ms.items()},
                   max_diff={n: [float((a - b).abs().max()) for a, b in zip(gr, grads["split"])] for n, gr in grads.items()})


# schedule choices of the warp-specialized lowering, on top of what the backend launches (config + SCHEDULES)
FOLD = {"base": {}, "nofold": {"fold": False}, "noearly": {"early_release": False}, "nowindow": {"window": False},
        "nocont": {"continuous_turns": False}, "nouniform": {"uniform_warpgroup": False},
        "old": {"fold": False, "early_release": False, "window": False, "continuous_turns": False},
        # session 15: the backward's schedule choices again, on today's code
        "pp": {"pingpong": True}, "nopp": {"pingpong": False}, "fold": {"fold": True},
        "uniform": {"uniform_warpgroup": True}, "s2": {"stages": 2}, "s3": {"stages": 3},
        # session 16: the row maximum as a chain (the tree is on since); LSE, Delta loaded at their own
        # block, not one ahead; every stored pair tested, or none where the tile is whole (ops.h store);
        # the rotated loop's first iteration on its own
        "notree": {"tree_max": False}, "nopf": {"prefetch": False},
        "tested": {"whole_tile_stores": False}, "whole": {"whole_tile_stores": True}, "peel": {"peel": True},
        # session 17: 2 or 4 pairs of a row a global store, swapped in the quad first (ops.h store_wide)
        "wd2": {"wide_stores": 2}, "wd4": {"wide_stores": 4}, "wd4ws": {"wide_stores": 4, "whole_tile_stores": True},
        "wd0": {"wide_stores": 0},  # (2 is the default since: a pair a store, as before)
        # session 19: 16-bit outputs through a staging tile per warpgroup and a TMA store
        "tma": {"tma_store": True},
        # session 22: the loop's LSE and Delta into each ring stage by the producer's TMA
        "vt": {"vec_tma": True}, "novt": {"vec_tma": False}}


def schedule(seqs="512,1024,4096,16384", only=None, dims=(128, 64), kernels=("fwd", "dq", "dkdv")):
    """Session 13: each schedule choice of the warp-specialized lowering (the scale folded into the
    exponent, early one-shot releases, the causal walk's L2 windows, turns across programs) turned off
    in turn, for the forward, dQ and dK/dV kernels as launched."""
    import torch
    from tiles import backends
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.kernels import attention_bwd_dkdv, attention_bwd_dq, attention_bwd_prep, attention_fwd
    hop = backends.get("hopper")
    for D in dims:
        for causal in (False, True):
            for S in map(int, seqs.split(",")):
                B, H = 16384 // S, 2048 // D
                shape = dict(D=D, causal=causal, S=S, B=B, H=H)
                f = 4 * B * H * S * S * D / (2 if causal else 1)
                sets = []
                for i in range(3):
                    g = torch.Generator(device="cuda").manual_seed(i)
                    q, k, v, do = (torch.randn(B, S, H, D, device="cuda", generator=g).bfloat16() for _ in range(4))
                    o, lse = torch.empty_like(q), torch.empty(B, H, S, device="cuda")
                    hop.launch(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=causal, D=D,
                               **W.config("attention_fwd", D=D))
                    delta = torch.empty(B, H, S, device="cuda")
                    hop.launch(attention_bwd_prep, o, do, delta, D=D)
                    sets.append(dict(q=q, k=k, v=v, do=do, o=torch.empty_like(q), lse=lse, lse2=torch.empty_like(lse),
                                     delta=delta, dq=torch.empty_like(q), dk=torch.empty_like(k), dv=torch.empty_like(v)))

                def args(kname, s):
                    if kname == "attention_fwd":
                        return attention_fwd, (s["q"], s["k"], s["v"], s["o"], s["lse2"]), ["o", "lse2"]
                    if kname == "attention_bwd_dq":
                        return attention_bwd_dq, (s["q"], s["k"], s["v"], s["do"], s["lse"], s["delta"], s["dq"]), ["dq"]
                    return (attention_bwd_dkdv, (s["q"], s["k"], s["v"], s["do"], s["lse"], s["delta"], s["dk"], s["dv"]),
                            ["dk", "dv"])

                for kname, flops in (("attention_fwd", f), ("attention_bwd_dq", 1.5 * f), ("attention_bwd_dkdv", 2 * f)):
                    if kname.split("_")[-1] not in kernels:
                        continue
                    variants = FOLD
                    if kname == "attention_bwd_dkdv":  # reads its one-shot K, V across the query-head loop
                        variants = {n: FOLD[n] for n in ("base", "nofold", "nocont", "nowindow", "nouniform", "pp", "nopp",
                                                         "fold", "uniform", "s2", "s3", "nopf", "tested", "whole", "peel",
                                                         "wd2", "wd4", "wd0", "vt", "novt")}
                    if only:
                        variants = {n: v for n, v in variants.items() if n in only}
                    if not causal:  # the L2 windows are a causal walk's
                        variants = {n: v for n, v in variants.items() if n != "nowindow"}
                    if set(variants) == {"base"}:
                        continue

                    def make(name, i, kname=kname, variants=variants):
                        kfn, a, _ = args(kname, sets[i])
                        opts = {**(W.SCHEDULES.get((kname, D)) or {}), **variants[name]}
                        return W.prepare(kfn, *a, D ** -0.5, causal=causal, D=D, options=opts,
                                         **W.config(kname, D=D, causal=causal, Sq=S))  # the launched tile
                    _sweep(kname.replace("attention_", ""), shape, flops, variants, make,
                           lambda i, kname=kname: [sets[i][n] for n in args(kname, sets[i])[2]])
                sets.clear()
                torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="bwd,fwd,ln")
    ap.add_argument("--seqs", default=None, help="sequence lengths of the bwd, fused and schedule parts (each "
                    "has its own default)")
    ap.add_argument("--variants", default="", help="fwd and schedule parts: only these variants (and base)")
    ap.add_argument("--dims", default="128,64", help="fwd and schedule parts: head dims")
    ap.add_argument("--kernels", default="fwd,dq,dkdv", help="schedule part: which kernels")
    args = ap.parse_args()
    for part in args.only.split(","):
        only = set(args.variants.split(",")) | {"base"} if args.variants else None
        dims = tuple(map(int, args.dims.split(",")))
        seqs = {"seqs": args.seqs} if args.seqs else {}
        {"bwd": lambda: bwd(**seqs), "fwd": lambda: fwd(only, dims), "ln": ln, "autograd": autograd,
         "fused": lambda: fused(**seqs),
         "schedule": lambda: schedule(only=only, dims=dims, kernels=tuple(args.kernels.split(",")), **seqs)}[part]()


if __name__ == "__main__":
    main()
