"""Index math past 2^31 elements: a GEMM whose A and C each hold more than 2^31 elements is right in
its last rows (32-bit offsets would wrap there). Needs an sm_90 GPU with ~10 GB free."""
import pytest
import torch

import tiles

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)),
                                reason="needs an sm_90 GPU (H100/H200) for the hopper backend")


def test_gemm_past_2_31_elements():
    M, K, N = 2**31 // 4096 + 300, 4096, 4096  # A and C: 2^31 + 300·4096 elements each
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16, generator=g)
    assert a.numel() > 2**31
    c = tiles.gemm(a, b, backend="hopper")
    torch.cuda.synchronize()
    for rows in (slice(0, 64), slice(M // 2, M // 2 + 64), slice(M - 64, M)):
        ref = a[rows].double() @ b.double()
        lp = (a[rows] @ b).double()
        e, e_lp = (c[rows].double() - ref).abs().max().item(), (lp - ref).abs().max().item()
        assert e <= 2 * e_lp + 1e-3, (rows, e, e_lp)
