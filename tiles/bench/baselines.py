"""The implementations a benchmark compares: tiles and every vendor baseline installed here.

Each maker returns {impl name: callable(inputs) -> output} for one kernel; impls that cannot run on
this machine are left out, with the reason in `skipped`."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import tiles


def _causal(q, k, causal: bool) -> dict:
    """SDPA's mask arguments for tiles' causal alignment, bottom-right: is_causal aligns top-left, the
    same only where seq_q == seq_k; otherwise the lower-right causal bias (which with one query row
    masks nothing)."""
    Sq, Sk = q.shape[2], k.shape[2]
    if not causal or Sq == Sk:
        return {"is_causal": causal}
    from torch.nn.attention.bias import causal_lower_right

    return {"attn_mask": causal_lower_right(Sq, Sk)}


def _sdpa(backend_enum):
    from torch.nn.attention import sdpa_kernel

    def run(x, causal):
        q, k, v = x["q_bhsd"], x["k_bhsd"], x["v_bhsd"]
        with sdpa_kernel([backend_enum]):
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=q.shape[1] != k.shape[1], **_causal(q, k, causal))

    return run


# FlexAttention compiles one Triton kernel per shape (tens of seconds each): outside the full suite it
# is measured at the two points the anchors quote.
FLEX_POINTS = ({"S": 2048, "D": 128, "causal": False}, {"S": 8192, "D": 128, "causal": False})


def attention_impls(device: torch.device, backend: str | None, backward: bool, skipped: dict,
                    shape: dict | None = None, suite: str = "standard") -> dict:
    impls = {}

    def tiles_fwd(x, causal):  # every impl returns (B, H, S, D), the layout the reference uses
        return tiles.attention(x["q"], x["k"], x["v"], causal=causal, backend=backend).transpose(1, 2)

    from tiles import backends

    needs = ("attention_fwd",) + (("attention_bwd_prep", "attention_bwd_dkdv", "attention_bwd_dq") if backward else ())
    chosen = backends.get(backend) if backend else backends.for_device(device)
    missing = [k for k in needs if not chosen.supports(k)]
    if device.type == "cuda" and (missing or chosen.name == "interp"):
        # Timing the interpreter on a GPU would measure Python, not a kernel: say what is missing instead.
        skipped["tiles"] = f"backend {chosen.name} does not lower {missing or needs} on this device yet"
    else:
        impls["tiles"] = tiles_fwd
    if device.type != "cuda":
        impls["torch_sdpa"] = _sdpa_math
        return impls
    from torch.nn.attention import SDPBackend

    if torch.version.hip is None:
        impls["sdpa_cudnn"] = _sdpa(SDPBackend.CUDNN_ATTENTION)
        impls["sdpa_flash"] = _sdpa(SDPBackend.FLASH_ATTENTION)
        point = shape is not None and any(all(shape.get(k) == v for k, v in p.items()) for p in FLEX_POINTS)
        if suite == "full" or point:
            try:
                impls["flex"] = _flex()
            except Exception as e:  # noqa: BLE001 - any failure means the baseline is absent
                skipped["flex"] = f"{type(e).__name__}: {e}"
    else:
        impls["sdpa"] = _sdpa(SDPBackend.FLASH_ATTENTION)
        try:
            import aiter  # noqa: F401

            impls["aiter"] = _aiter_fwd
        except ImportError as e:
            skipped["aiter"] = f"not installed ({e})"
    return impls


def _sdpa_math(x, causal):
    q, k, v = x["q_bhsd"], x["k_bhsd"], x["v_bhsd"]
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=q.shape[1] != k.shape[1], **_causal(q, k, causal))


def _flex():
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    compiled = torch.compile(flex_attention, dynamic=False)
    masks = {}

    def run(x, causal):
        q, k, v = x["q_bhsd"], x["k_bhsd"], x["v_bhsd"]
        bm = None
        if causal:
            key = (q.shape[2], k.shape[2])
            if key not in masks:
                off = k.shape[2] - q.shape[2]
                masks[key] = create_block_mask(lambda b, h, qi, ki: ki <= qi + off, None, None, q.shape[2],
                                               k.shape[2], device=q.device)
            bm = masks[key]
        return compiled(q, k, v, block_mask=bm, enable_gqa=q.shape[1] != k.shape[1])

    return run


def _aiter_fwd(x, causal):
    import aiter

    return aiter.flash_attn_func(x["q"], x["k"], x["v"], causal=causal)


def gemm_impls(device: torch.device, backend: str | None, skipped: dict) -> dict:
    impls = {"tiles": lambda x: tiles.gemm(x["a"], x["b"], backend=backend)}
    name = "torch_cpu" if device.type != "cuda" else ("hipblaslt" if torch.version.hip else "cublas")
    impls[name] = lambda x: torch.matmul(x["a"], x["b"])
    return impls


VENDOR_BASELINES = {"cublas", "hipblaslt", "sdpa_cudnn", "sdpa", "aiter", "torch_cpu", "torch_sdpa"}
