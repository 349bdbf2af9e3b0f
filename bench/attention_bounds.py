"""Session 19: what each part of the forward's softmax costs at D = 128, as speed bounds beside the
launched kernel and cuDNN (the way bench/fp8_bounds.py bounds the fp8 GEMM's promotion).

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_bounds.py

The launched forward's generated source with one part of the softmax changed (none of them computes
attention; everything else is the launched kernel, instruction for instruction):
* `noexp`: P = scale·S − m without the exponential (MUFU.EX2 gone, its FFMA kept);
* `nomax`: the row maximum not taken (m_new = m: no FMNMX tree, no shuffles);
* `norescale`: O not rescaled by alpha (64 FMUL a thread a block);
* `nosum`: the row sum not taken;
* `none`: all four (measured above the tensor cores' peak on the H200: ptxas then drops work, so
  this one is not a bound).
Timed interleaved (hopper_gemm_tiles.timed: 20 launches behind a sleep, medians) next to SDPA's cuDNN
backend, at B·S = 16k tokens, H·D = 2048, non-causal.
"""
import dataclasses
import math

import torch

from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
from tiles.kernels import attention_fwd

import hopper_gemm_tiles as ht

C = "(scale * 1.4426950408889634f)"
EDITS = {
    "noexp": [(f"exp2_scaled_row(s, s, {C}, m_new);",
               f"map_row(s, s, m_new, [=](float x, float y) {{ return fmaf(x, {C[1:-1]}, -y); }});")],
    "nomax": [(f"row_max_scaled<true>(m_new, s, {C}, m);", "copy(m_new, m);")],
    "norescale": [("mul_row(o, o, alpha);", "")],
    "nosum": [("row_sum(l, s, l);", "")],
}
EDITS["none"] = [e for k in ("noexp", "nomax", "norescale", "nosum") for e in EDITS[k]]


def launcher(q, k, v, o, lse, edit=None):
    """A prepared launch of the launched forward, or of its source with `edit` applied: the edited
    Lowered goes into the lowering cache under an option of its own, which prepare then finds."""
    D = q.shape[-1]
    opts = W.schedule("attention_fwd", D, (q, k, v, o, lse, D ** -0.5)) or {}
    cfg = W.config("attention_fwd", D=D, causal=False, Sq=q.shape[1])
    if edit is None:
        return W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=False, D=D, options=opts, **cfg)
    base = W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=False, D=D, options=opts, **cfg).lowered
    src = base.source
    for old, new in EDITS[edit]:
        if src.count(old) != 1:
            raise RuntimeError(f"{edit}: {old!r} is not in the launched source once")
        src = src.replace(old, new)
    low = dataclasses.replace(base, source=src + f"\n// bound: {edit}\n", entry=base.entry)
    key_opts = {**opts, "bound": edit}
    kid = next(key[0] for key, lw in W._lowered_cache.items() if lw is base)  # the traced kernel's id
    W._lowered_cache[(kid, tuple(sorted(key_opts.items())))] = low
    return W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=False, D=D, options=key_opts, **cfg)


def main():
    D, H = 128, 16
    for S in (4096, 16384):
        B = 16384 // S
        sets = []
        for i in range(3):
            g = torch.Generator(device="cuda").manual_seed(i)
            q, k, v = (torch.randn(B, S, H, D, device="cuda", generator=g).bfloat16() for _ in range(3))
            sets.append((q, k, v, torch.empty_like(q), torch.empty(B, H, S, device="cuda")))
        fns = {}
        for name in ("launched", *EDITS):
            gos = [launcher(*x, edit=None if name == "launched" else name) for x in sets]
            fns[name] = lambda i, gos=gos: gos[i % 3]()
        qt = [tuple(t.transpose(1, 2) for t in x[:3]) for x in sets]

        def cudnn(i):
            with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
                torch.nn.functional.scaled_dot_product_attention(*qt[i % 3])
        fns["sdpa_cudnn"] = cudnn
        ms = ht.timed(fns, rounds=9)
        flops = 4 * B * H * S * S * D
        print(f"D={D} S={S} B={B}", " ".join(f"{n}={flops / (t * 1e-3) / 1e12:.0f}({ms['launched'] / t:.3f})"
                                             for n, t in ms.items()), flush=True)
        assert math.isfinite(ms["launched"])


if __name__ == "__main__":
    main()
