"""Session 47: the packed dK / dV kernel faulted on the GPU (CUDA_ERROR_ILLEGAL_INSTRUCTION, the producer's
first ring loads). One launch of it with a variant of its schedule options, in a process of its own, on
the sanitizer's failing case (four sequences in 1000 rows, D = 128, causal, GQA 8 / 2): ok or the error,
and dK / dV's distance to float32 autograd per sequence where it runs.

    PYTHONPATH=. CUDA_LAUNCH_BLOCKING=1 python3 bench/varlen_bwd_bisect.py VARIANT
"""
import sys

import torch

import tiles
from tiles import api
from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
from tiles.kernels import attention_bwd_dkdv, attention_bwd_prep

VARIANTS = {"launched": {}, "no_vec_tma": {"vec_tma": False}, "not_persistent": {"persistent": False},
            "no_rotate": {"rotate": False}, "reversed": {"reverse": True}, "stages2": {"stages": 2},
            "no_whole_stores": {"whole_tile_stores": False}, "no_fold": {"fold": False}}


def main(variant):
    torch.manual_seed(0)
    D, causal = 128, True
    cu = torch.tensor([0, 5, 300, 300, 1000], dtype=torch.int32, device="cuda")
    q, k, v, do = (torch.randn(1, 1000, h, D, device="cuda", dtype=torch.bfloat16) for h in (8, 2, 2, 8))
    out, lse = api._attention_varlen_fwd_impl(q, k, v, cu, cu, 700, causal, D ** -0.5, "hopper")
    delta = torch.empty(1, 8, 1000, device="cuda")
    problem = dict(D=D, causal=causal, Sq=700, Sk=1000, B=4, Hkv=2)
    api._launch("hopper", attention_bwd_prep, problem, out, do, delta, D=D)
    dk, dv = torch.zeros_like(k), torch.zeros_like(v)
    cfg = W.config("attention_bwd_dkdv", **problem)
    blocks = api._blocks(cu, cu, cfg.get("BN", 128), 1000, causal, keys=True)
    args = (q, k, v, do, lse, delta, dk, dv, D ** -0.5, blocks)
    opts = {**(W.schedule("attention_bwd_dkdv", D, args, causal) or {}), **VARIANTS[variant]}
    try:
        W.prepare(attention_bwd_dkdv, *args, causal=causal, D=D, options=opts, **cfg)()
        torch.cuda.synchronize()
    except Exception as e:
        print(f"{variant}: FAIL {type(e).__name__}: {str(e).splitlines()[0][:200]} (options {opts})")
        return
    err = 0.0
    for b in range(4):
        a, e = cu[b].item(), cu[b + 1].item()
        if e == a:
            continue
        x = [t[0, a:e].float().transpose(0, 1).requires_grad_() for t in (q, k, v)]
        kk, vv = (t.repeat_interleave(4, 0) for t in x[1:])
        o = torch.nn.functional.scaled_dot_product_attention(x[0], kk, vv, is_causal=causal)
        gk, gv = torch.autograd.grad(o, x[1:], do[0, a:e].float().transpose(0, 1))
        err = max(err, (gk.transpose(0, 1) - dk[0, a:e].float()).abs().max().item(),
                  (gv.transpose(0, 1) - dv[0, a:e].float()).abs().max().item())
    print(f"{variant}: ok, max |dK, dV - float32| {err:.3e} (options {opts})")


if __name__ == "__main__":
    main(sys.argv[1])
