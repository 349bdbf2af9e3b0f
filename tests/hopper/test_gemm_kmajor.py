"""tiles.gemm(x, w.t()) on Hopper with B read where it lies: the GEMM template's K-major B form, launched
through the backend (HopperBackend.gemm_b_kmajor). The option stays off until this file passes on the
device; these tests turn it on for themselves.

On the CPU: the lowering with the option renders the K-major form and compiles without spills. On an
sm_90 GPU: against float64 at shapes with tails in M, N and K, and through autograd; the launch took
the K-major kernel and read the caller's weight in place (no copy)."""
from __future__ import annotations

import pytest
import torch

import needs  # tests/hopper is on sys.path


def test_kmajor_lowering_compiles(tmp_path):
    runtime = needs.nvrtc()
    from test_compile import assert_no_spills
    from tiles import backends
    from tiles.kernels import gemm
    meta = lambda *s: torch.empty(s, dtype=torch.bfloat16, device="meta")  # noqa: E731
    be = backends.get("hopper")
    w = meta(4096, 1024)  # (N, K)
    low = be.lower(gemm, meta(2048, 1024), w.t(), meta(2048, 4096), options={"b_kmajor": True, "cluster": 1})
    assert low.notes["config"]["b_kmajor"] is True
    c = runtime.compile_cuda(low.source, name=low.entry + ".cu", cache=False)
    assert_no_spills(c, low.entry, tmp_path)


@pytest.mark.parametrize("mnk", [(2048, 4096, 1024), (1000, 1000, 1000), (4097, 4095, 1032), (64, 200, 72)],
                         ids=lambda s: "x".join(map(str, s)))
def test_weight_read_in_place_against_float64(mnk, monkeypatch):
    be = needs.hopper_gpu()
    import tiles
    monkeypatch.setattr(type(be), "gemm_b_kmajor", True)
    M, N, K = mnk
    g = torch.Generator(device="cuda").manual_seed(M + N + K)
    x = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    w = torch.randn(N, K, device="cuda", generator=g).bfloat16()
    c = tiles.gemm(x, w.t(), backend="hopper")
    ref = x.double() @ w.double().t()
    e, e_lp = (c.double() - ref).abs().max().item(), ((x @ w.t()).double() - ref).abs().max().item()
    r32 = ref.float()
    assert e <= 2 * e_lp + 2 * ((r32 + 0.3 - 0.3) - r32).abs().max().item(), (e, e_lp)
    kmajor = [low for low in be._lowered.values() if low.notes["config"].get("b_kmajor")]
    assert kmajor, "the launch did not take the K-major kernel"
    if (K * 2) % 16 == 0:  # 16-byte aligned weight rows: its tensor map points at w itself
        hit = [v for v in be._launches._d.values() if v[3] in kmajor]
        assert hit, "the K-major launch was not cached: it copied the weight"


def test_linear_forward_and_backward(monkeypatch):
    """y = x @ w.T through autograd with w read in place: dx and dw against float64 (3·E(lp) + fl)."""
    be = needs.hopper_gpu()
    import tiles
    monkeypatch.setattr(type(be), "gemm_b_kmajor", True)
    g = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randn(300, 512, device="cuda", generator=g).bfloat16().requires_grad_()
    w = torch.randn(768, 512, device="cuda", generator=g).bfloat16().requires_grad_()
    dy = torch.randn(300, 768, device="cuda", generator=g).bfloat16()
    tiles.gemm(x, w.t(), backend="hopper").backward(dy)
    xr, wr = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    (xr @ wr.t()).backward(dy.double())
    xl, wl = x.detach().requires_grad_(), w.detach().requires_grad_()
    (xl @ wl.t()).backward(dy)
    for got, ref, lp in ((x.grad, xr.grad, xl.grad), (w.grad, wr.grad, wl.grad)):
        r32 = ref.float()
        fl = 2 * ((r32 + 0.3 - 0.3) - r32).abs().max().item()
        e, e_lp = (got.double() - ref).abs().max().item(), (lp.double() - ref).abs().max().item()
        assert e <= 3 * e_lp + fl, (e, e_lp)
