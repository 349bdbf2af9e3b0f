"""attention_bwd_fused (dK, dV and dQ in one pass, dQ added up with store_add) against the split
backward (attention_bwd_dkdv + attention_bwd_dq) in the interpreter, which defines both; the GPU
lowering is checked against float64 in tests/portability/test_attention.py::test_backward_fused."""
import pytest
import torch

import tiles
from tiles import backends
from tiles.core.lang import TileError
from tiles.kernels import attention_bwd_dkdv, attention_bwd_dq, attention_bwd_fused, attention_bwd_prep


@pytest.mark.parametrize("B,Sq,Sk,H,Hkv,D,causal", [(1, 100, 130, 4, 2, 64, True), (2, 70, 70, 2, 2, 64, False),
                                                    (1, 130, 90, 2, 1, 64, True), (1, 64, 64, 1, 1, 128, False),
                                                    (1, 200, 60, 2, 1, 64, True)])  # two blocks see no key
def test_fused_matches_split(B, Sq, Sk, H, Hkv, D, causal):
    be = backends.get("interp")
    g = torch.Generator().manual_seed(B * Sq + Sk)
    q, do = (torch.randn(B, Sq, H, D, generator=g).bfloat16() for _ in range(2))
    k, v = (torch.randn(B, Sk, Hkv, D, generator=g).bfloat16() for _ in range(2))
    o, lse = tiles.attention(q, k, v, causal=causal, backend="interp", return_lse=True)
    delta = torch.empty(B, H, Sq)
    be.launch(attention_bwd_prep, o, do, delta, D=D)
    scale = D ** -0.5
    dk, dv, dq = torch.empty_like(k), torch.empty_like(v), torch.empty_like(q)
    be.launch(attention_bwd_dkdv, q, k, v, do, lse, delta, dk, dv, scale, causal=causal, D=D)
    be.launch(attention_bwd_dq, q, k, v, do, lse, delta, dq, scale, causal=causal, D=D)
    dk2, dv2, acc = torch.empty_like(k), torch.empty_like(v), torch.zeros(B, Sq, H, D)
    be.launch(attention_bwd_fused, q, k, v, do, lse, delta, dk2, dv2, acc, scale, causal=causal, D=D)
    assert torch.equal(dk, dk2) and torch.equal(dv, dv2)  # the same ops in the same order
    # dQ: f32 sums over key blocks against the split kernel's bf16 output: within its rounding
    assert (acc - dq.float()).abs().max() <= 2 ** -7 * dq.float().abs().max() + 1e-3


def test_store_add_and_store_shared_are_checked():
    from tiles.core.dtypes import f32
    from tiles.core.lang import store, store_add
    from tiles.core.trace import kernel

    @kernel
    def add_bf16(k, X, Y):
        t = k.reg(16, 16, f32)
        store_add(Y[:, :], t)

    @kernel
    def shared_window(k, X, Y):
        t, s = k.reg(16, 16, f32), k.shared(16, 16, X.dtype)
        store(s, t, row=0)

    x = torch.empty(16, 16, dtype=torch.bfloat16, device="meta")
    with pytest.raises(TileError, match="atomic accumulation is into f32 only"):
        add_bf16.trace(x, x)
    with pytest.raises(TileError, match="written whole"):
        shared_window.trace(x, x)
