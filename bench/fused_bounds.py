"""Session 20: where the fused backward at D = 64 (dQ summed by warpgroup, split_k) loses to the split
one, as speed bounds beside the split kernels and cuDNN.

    PYTHONPATH=.:bench:tests/hopper python3 bench/fused_bounds.py
    BOUNDS=persist,persist_nostsm,cudnn ... (only these, and the split kernels)
    FB_CASES=0:4096,1:4096 ... (only these causal:S cases; default non-causal 4k and 16k, causal 16k)

The fused kernel's generated source, with one CTA a program or walked persistently (as launched), with
one change (those marked * compute no attention; everything else is the kernel as launched):
* `noreduce`*: the reducer warp's TMA reduce of dQ taken out (its hand-over with the consumers kept);
* `nodq`*: dQ taken out whole (its wgmma, the staging tile, the hand-over and the reduce): what is left
  is the dK/dV kernel plus the store of dS to shared memory;
* `nodqscale`*: dQ's per-block scaling by the softmax scale left out (where it could go: dQacc's
  conversion); `nostsm`: dS stored a pair a st.shared, not four pairs a stmatrix; `noload`*: the
  loop's loads of the next block's LSE and Delta left out; `pfmid`: those loads issued after the dS
  barrier instead of at the block's start; `nopf`: the option prefetch off (each block loads its own
  at its start) (session 21); `vt`: the option vec_tma (LSE and Delta by the producer's TMA, session 22);
* `shift`: each key block's walk over the query blocks starts at its own place, (kb + pid0 * NQ /
  grid0) mod NQ, so that the CTAs running at once add into different dQ rows (non-causal only;
  exact: only the order of dQacc's additions changes); `slowred`: the reducer warp sleeps 300 ns after
  each staging tile's hand-back, 600 ns a block (session 23: how much slack it has).
`dkdv` is the split backward's dK/dV kernel alone (its dQ then the split's, from the call before).
The kernels alone (no preparation, no dQacc zeroing or conversion), timed interleaved
(hopper_gemm_tiles.timed: 20 launches behind a sleep, medians), at B·S = 16k tokens, H·D = 2048;
cuDNN through autograd (its whole backward). Each variant's dQ, dK and dV checked against the split
kernels' where it computes them.
"""
import dataclasses
import os

import torch

from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
from tiles.kernels import attention_bwd_dkdv, attention_bwd_dq, attention_bwd_fused

import hopper_gemm_tiles as ht

FUSED = ("attention_bwd_fused", 64)
SHIFT = "#define KB(x) (((x) + pid0 * ceil_div(Q_shape1, 64) / ceil_div(K_shape1, 128)) % ceil_div(Q_shape1, 64))\n"
EDITS = {
    "noreduce": [("reduce_add_async(&map_dQacc, S.dq_red[w], 0, pid1 * (Q_shape2 / K_shape2) + i, kb * 64, pid2);", "")],
    "nodq": [("mma_AtB_slice<WG_ROWS>(dq, S.dss[dsb], S.kt, wg_row0, false);", ""),
             ("arch::bar_sync(4 + 2 * cw, 128 + 32);  // the reducer has read the staging tile's last contents", ""),
             ("store(S.dq_red[cw], dq, 0);", ""),
             ("arch::bar_arrive(5 + 2 * cw, 128 + 32);  // full", "// full"),
             ("arch::bar_sync(5 + 2 * w, 128 + 32);", ""),
             ("reduce_add_async(&map_dQacc, S.dq_red[w], 0, pid1 * (Q_shape2 / K_shape2) + i, kb * 64, pid2);", ""),
             ("arch::bar_arrive(4 + 2 * w, 128 + 32);  // ... and read", "// ... and read")],
    # session 21: dQ's per-block scaling left out (it could move to dQacc's conversion); dS stored a pair
    # a st.shared instead of four pairs a stmatrix
    "nodqscale": [("mul(dq, dq, scale);", "")],
    "nostsm": [("#include <tiles/tiles.h>", "#define TILES_NO_STMATRIX\n#include <tiles/tiles.h>")],
}
# session 21: the loop's loads of the next block's LSE and Delta (global loads a proxy fence may wait
# for) left out (`noload`*: each block uses the first block's), or issued after the dS barrier (`pfmid`)
_LOADS = ("          load(lse_next, L + pid2 * L_stride0 + (pid1 * (Q_shape2 / K_shape2) + i) * L_stride1, L_stride2, "
          "L_shape2, (kb + 1) * 64);\n",
          "          load(delta_next, Delta + pid2 * Delta_stride0 + (pid1 * (Q_shape2 / K_shape2) + i) * Delta_stride1, "
          "Delta_stride2, Delta_shape2, (kb + 1) * 64);\n")
_DS_BAR = "          arch::bar_sync(8 + cw, 128);  // this warpgroup's rows of dss are in (only it reads them)\n"
EDITS["noload"] = [(x, "") for x in _LOADS]
EDITS["pfmid"] = [(x, "") for x in _LOADS] + [(_DS_BAR, _DS_BAR + "".join(_LOADS))]
# session 23: how much slack the reducer warp has. `slowred`: it sleeps 300 ns after handing each
# staging tile back (600 ns a block, of about 1.5 us); with `noreduce` (above) it has no reduce to wait for
EDITS["slowred"] = [("arch::bar_arrive(4 + 2 * w, 128 + 32);  // ... and read: empty",
                     "arch::bar_arrive(4 + 2 * w, 128 + 32);  // ... and read: empty\n__nanosleep(300);")]
# BOUNDS=name,name,...: only these variants (split always)
ONLY = set(filter(None, os.environ.get("BOUNDS", "").split(",")))


def edited(src: str, edit: str) -> str:
    if edit == "shift":
        code = []
        for line in src.splitlines():
            if not line.lstrip().startswith("//"):
                line = line.replace("(kb + 1) * 64", "KB(kb + 1) * 64").replace("(0) * 64", "KB(0) * 64")
                line = line.replace(" kb * 64", " KB(kb) * 64")
            code.append(line)
        src = "\n".join(code)
        if src.count("KB(") < 7:
            raise RuntimeError(f"shift: {src.count('KB(')} uses of the query block, expected 7")
        return src.replace("#include <tiles/tiles.h>", "#include <tiles/tiles.h>\n" + SHIFT, 1)
    for old, new in EDITS[edit]:
        if src.count(old) != 1:
            raise RuntimeError(f"{edit}: {old!r} is not in the source once")
        src = src.replace(old, new)
    return src


def fused(args, causal, persistent=False, edit=None):
    """A prepared launch of the fused kernel (one CTA a program, or walked persistently), or of its source with
    `edit` applied: the edited Lowered goes into the lowering cache under an option of its own."""
    opts = {**W.SCHEDULES[FUSED], "persistent": persistent}
    if edit == "nopf":  # an option, not an edit: LSE and Delta loaded at their own block
        opts, edit = {**opts, "prefetch": False}, None
    if edit == "vt":  # an option: LSE and Delta into the ring stages by the producer's TMA (session 22)
        opts, edit = {**opts, "vec_tma": True}, None
    kw = dict(causal=causal, D=64, **W.config("attention_bwd_fused", D=64))
    base = W.prepare(attention_bwd_fused, *args, options=opts, **kw)
    if edit is None:
        return base
    low = base.lowered
    new = dataclasses.replace(low, source=edited(low.source, edit) + f"\n// bound: {edit}\n")
    key_opts = {**opts, "bound": edit}
    kid = next(key[0] for key, lw in W._lowered_cache.items() if lw is low)
    W._lowered_cache[(kid, tuple(sorted(key_opts.items())))] = new
    return W.prepare(attention_bwd_fused, *args, options=key_opts, **kw)


def main():
    D, H = 64, 32
    # FB_CASES=0:4096,1:16384: only these (causal:S) cases
    cases = [(bool(int(c)), int(n)) for c, n in (x.split(":") for x in os.environ.get("FB_CASES", "").split(",") if x)]
    for causal, S in cases or ((False, 4096), (False, 16384), (True, 16384)):
        B = 16384 // S
        sets = []
        for i in range(3):
            g = torch.Generator(device="cuda").manual_seed(i)
            q, k, v, do = (torch.randn(B, S, H, D, device="cuda", generator=g).bfloat16() for _ in range(4))
            lse = torch.randn(B, H, S, device="cuda", generator=g) * 0.1 + 9.0  # rows' log-sum-exp about 9
            delta = torch.randn(B, H, S, device="cuda", generator=g) * 0.1
            outs = dict(dk=torch.empty_like(k), dv=torch.empty_like(v), dq=torch.empty_like(q),
                        acc=torch.zeros(B, S, H, D, device="cuda"))
            sets.append(((q, k, v, do, lse, delta), outs))
        fns, check = {}, {}
        for name in ("split", "dkdv", "fused", "persist", "noreduce", "nodq", "persist_nodq", "shift", "persist_shift",
                     "persist_nodqscale", "persist_nostsm", "persist_noload", "persist_pfmid", "persist_nopf", "persist_vt",
                     "persist_noreduce", "persist_slowred"):
            if causal and "shift" in name or ONLY and name not in ONLY | {"split"}:
                continue
            gos = []
            for (q, k, v, do, lse, delta), o in sets:
                if name in ("split", "dkdv"):
                    a = W.prepare(attention_bwd_dkdv, q, k, v, do, lse, delta, o["dk"], o["dv"], D ** -0.5,
                                  causal=causal, D=D, options=W.SCHEDULES.get(("attention_bwd_dkdv", D)),
                                  **W.config("attention_bwd_dkdv", D=D))
                    b = W.prepare(attention_bwd_dq, q, k, v, do, lse, delta, o["dq"], D ** -0.5, causal=causal,
                                  D=D, options=W.schedule("attention_bwd_dq", D, (q,), causal),
                                  **W.config("attention_bwd_dq", D=D))
                    gos.append(lambda a=a, b=b, both=name == "split": (a(), b()) if both else a())
                else:
                    args = (q, k, v, do, lse, delta, o["dk"], o["dv"], o["acc"], D ** -0.5)
                    edit = name.replace("persist_", "") if name not in ("fused", "persist") else None
                    gos.append(fused(args, causal, persistent=name.startswith("persist"), edit=edit))
            # outputs of one launch on set 0, against the split kernels'
            o = sets[0][1]
            o["acc"].zero_()
            gos[0]()
            torch.cuda.synchronize()
            check[name] = {t: o[t].float().clone() for t in ("dk", "dv")}
            check[name]["dq"] = (o["dq"].float() if name in ("split", "dkdv") else o["acc"] * 1.0).clone()
            fns[name] = lambda i, gos=gos: gos[i % 3]()
        qt = [tuple(t.transpose(1, 2).detach().requires_grad_() for t in x[0][:3]) for x in sets]
        douts = [x[0][3].transpose(1, 2) for x in sets]
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
            outs_c = [torch.nn.functional.scaled_dot_product_attention(*x, is_causal=causal) for x in qt]

        def cudnn(i):
            torch.autograd.grad(outs_c[i % 3], qt[i % 3], douts[i % 3], retain_graph=True)
        fns["cudnn"] = cudnn
        ms = ht.timed(fns, rounds=7, inner=5)
        ref = check["split"]
        err = {n: max(float((c[t] - ref[t]).abs().max() / ref[t].abs().max().clamp_min(1e-30)) for t in ref)
               for n, c in check.items()}
        flops = 2.5 * 4 * B * H * S * S * D / (2 if causal else 1)
        print(f"D={D} causal={int(causal)} S={S} B={B}", " ".join(
            f"{n}={t:.3f}ms/{flops / (t * 1e-3) / 1e12:.0f}({ms['split'] / t:.3f}){'' if err.get(n, 0) < 0.02 else ' err %.3g' % err[n]}"
            for n, t in ms.items()), flush=True)


if __name__ == "__main__":
    main()
