"""A digest of every attention source the lowerings render: Hopper's over kernels, head dims, causal or
not, the launcher's schedules at several query lengths and each schedule option on its own; CDNA's
(`--cdna`) over kernels, both targets, head dims, causal or not, output dtypes and the split of a short
grid. For a change meant to leave the generated code alone (a refactor of a lowering): run it before,
save the output, run it after and compare. It runs on the CPU (meta tensors, no compile).

    PYTHONPATH=. python3 bench/render_digest.py [--cdna] > /tmp/before.txt
    ... change ...
    PYTHONPATH=. python3 bench/render_digest.py [--cdna] | diff /tmp/before.txt -

Each line is a case and the sha256 of its source (or the lowering's refusal, which must not
change either).
"""
import hashlib

import torch

from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as L
from tiles.core.lowering import LoweringError
from tiles.kernels import attention_bwd_dkdv, attention_bwd_dq, attention_bwd_fused, attention_fwd

KERNELS = {"attention_fwd": attention_fwd, "attention_bwd_dq": attention_bwd_dq,
           "attention_bwd_dkdv": attention_bwd_dkdv, "attention_bwd_fused": attention_bwd_fused}
# every option a schedule or a benchmark variant sets, each tried on its own over the pattern's default
TOGGLES = [{"pingpong": False}, {"rotate": False}, {"hoist": False}, {"persistent": False}, {"stages": 2},
           {"stages": 3}, {"fold": False}, {"early_release": False}, {"window": False},
           {"continuous_turns": False}, {"uniform_warpgroup": False}, {"tree_max": False}, {"prefetch": False},
           {"ds_stages": 1}, {"reducer": False}, {"whole_tile_stores": True}, {"peel": True}, {"wide_stores": 0},
           {"wide_stores": 4}, {"tma_store": True}, {"stmatrix": False}, {"vec_tma": True}, {"resident": True},
           {"quad_sums": False}, {"split_tail": True}, {"ring_store": True}, {"ring_store": True, "split_tail": True},
           {"ring_store": True, "peel": True}]


def _meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


def trace(kernel: str, D: int, causal: bool, S: int, dtype=torch.bfloat16):
    q = _meta(2, S, 16, D, dtype=dtype)
    kv = _meta(2, S, 4, D, dtype=dtype)
    lse = _meta(2, 16, S, dtype=torch.float32)
    over = L.config(kernel, D=D, causal=causal, Sq=S)
    kfn = KERNELS[kernel]
    if kernel == "attention_bwd_dkdv":
        return kfn.trace(q, kv, kv, q, lse, lse, kv, kv, D ** -0.5, causal=causal, D=D, **over), (q, kv)
    if kernel == "attention_bwd_fused":
        acc = _meta(2, S, 16, D, dtype=torch.float32)
        return kfn.trace(q, kv, kv, q, lse, lse, kv, kv, acc, D ** -0.5, causal=causal, D=D, **over), (q, kv)
    if kernel == "attention_bwd_dq":
        return kfn.trace(q, kv, kv, q, lse, lse, q, D ** -0.5, causal=causal, D=D, **over), (q, kv)
    return kfn.trace(q, kv, kv, q, lse, D ** -0.5, causal=causal, D=D, **over), (q, kv)


def digest(k, options) -> str:
    try:
        low = L(k, **options).lower()
    except LoweringError as e:
        return "refused: " + hashlib.sha256(str(e).encode()).hexdigest()[:16]
    return hashlib.sha256(low.source.encode()).hexdigest()[:16] + f" {low.entry}"


def cases():
    for kernel in KERNELS:
        for D in (64, 128):
            for causal in (False, True):
                for S in (512, 2048, 4096, 16384):
                    k, tensors = trace(kernel, D, causal, S)
                    opts = L.schedule(kernel, D, tensors, causal) or {}
                    yield f"{kernel} D={D} causal={causal} S={S} launched {sorted(opts.items())}", k, opts
                k, _ = trace(kernel, D, causal, 4096)
                for t in TOGGLES:
                    yield f"{kernel} D={D} causal={causal} {sorted(t.items())}", k, t
    k, _ = trace("attention_fwd", 64, False, 1024, dtype=torch.float16)
    yield "attention_fwd D=64 f16", k, {}


def cdna_cases():
    """(name, digest) of every CDNA attention source: forward (whole, and split for each output dtype),
    backward dQ and dK / dV, on gfx942 and gfx950."""
    from tiles import backends

    b = backends.get("cdna")
    for arch in ("gfx942", "gfx950"):
        for D in (64, 128):
            for causal in (False, True):
                q, kv = _meta(2, 300, 8, D), _meta(2, 500, 2, D)
                lse, kw = _meta(2, 8, 300, dtype=torch.float32), dict(causal=causal, D=D, arch=arch)
                runs = [("attention_fwd", (q, kv, kv, q, lse, 0.1), {}),
                        ("attention_fwd", (q, kv, kv, _meta(2, 300, 8, D, dtype=torch.float32), lse, 0.1), {})]
                runs += [("attention_fwd", (q, kv, kv, _meta(2, 300, 8, D, dtype=torch.float32), lse, 0.1),
                          {"split": out}) for out in ("bf16", "f16", "f32")]
                runs += [("attention_bwd_dq", (q, kv, kv, q, lse, lse, q, 0.1), {}),
                         ("attention_bwd_dkdv", (q, kv, kv, q, lse, lse, kv, kv, 0.1), {})]
                for kernel, args, extra in runs:
                    name = f"cdna {arch} {kernel} D={D} causal={causal} {args[3].dtype} {extra}"
                    try:
                        low = b.lower(KERNELS[kernel], *args, **kw, **extra, **b.config(kernel, arch, D=D))
                    except LoweringError as e:
                        yield name, "refused: " + hashlib.sha256(str(e).encode()).hexdigest()[:16]
                        continue
                    yield name, hashlib.sha256(low.source.encode()).hexdigest()[:16] + f" {low.entry}"


if __name__ == "__main__":
    import sys

    if "--cdna" in sys.argv[1:]:
        for name, d in cdna_cases():
            print(name, "->", d)
    else:
        for name, k, opts in cases():
            print(name, "->", digest(k, opts))
