"""gemm_fp8 (block-scaled 8-bit GEMM) against the float64 dequantized reference, on every backend present,
each in its machine's 8-bit format (OCP e4m3fn: interp, Hopper, gfx950; e4m3fnuz: gfx942)."""
import pytest
import torch

import tiles
from reference import fl, max_err
from tiles import backends

E4M3, FNUZ = torch.float8_e4m3fn, torch.float8_e4m3fnuz
FMAX = {E4M3: 448.0, FNUZ: 240.0}
BLOCK = 128


def _format(name):
    check = getattr(backends.get(name), "check_fp8", None)
    for dt in (E4M3, FNUZ):
        try:
            if check is not None:
                check("a", dt)
            return dt
        except TypeError as e:  # the backend's "takes the other format" refusal, and nothing else
            if "a has dtype" not in str(e):
                raise
            continue
    pytest.skip(f"backend {name} takes neither 8-bit e4m3 format")


def _quantize(x, block_rows, dt):
    """x (R, C) -> (x8, scales (cdiv(R, block_rows), cdiv(C, 128))), one scale per block: max |x| / fmax."""
    R, C = x.shape
    Rb, Cb = -(-R // block_rows), -(-C // BLOCK)
    xp = torch.nn.functional.pad(x, (0, Cb * BLOCK - C, 0, Rb * block_rows - R)).view(Rb, block_rows, Cb, BLOCK)
    s = xp.abs().amax(dim=(1, 3)).clamp_min(1e-4) / FMAX[dt]
    x8 = (xp / s[:, None, :, None]).view(Rb * block_rows, Cb * BLOCK)[:R, :C].to(dt)
    return x8, s.contiguous()


def _dequantize(x8, s, block_rows):
    R, C = x8.shape
    return x8.double() * s.double().repeat_interleave(block_rows, 0)[:R].repeat_interleave(BLOCK, 1)[:, :C]


SHAPES = [(1, 1, 1), (7, 130, 200), (129, 257, 300), (64, 128, 384)]


@pytest.mark.parametrize("mnk", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("layout", ["kmajor", "transposed"])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32])
def test_gemm_fp8(backend, mnk, layout, out_dtype, monkeypatch):
    name, device = backend
    monkeypatch.setenv("TILES_POISON", "1")  # unwritten elements are NaN and fail
    M, N, K = mnk
    dt = _format(name)
    g = torch.Generator().manual_seed(M * 7 + N + K)
    a8, sa = _quantize(torch.randn(M, K, generator=g), 1, dt)
    b8, sb = _quantize(torch.randn(N, K, generator=g), BLOCK, dt)
    ref = _dequantize(a8, sa, 1) @ _dequantize(b8, sb, BLOCK).T
    a8, b8, sa, sb = (t.to(device) for t in (a8, b8, sa, sb))
    if layout == "transposed":  # (K, M) / (K, N) storage and K-block-major scales, passed as views
        a8, b8, sa, sb = (t.t().contiguous().t() for t in (a8, b8, sa, sb))
    c = tiles.gemm_fp8(a8, b8, sa, sb, out_dtype=out_dtype, backend=name)
    assert c.shape == (M, N) and c.dtype == out_dtype
    # TESTING.md: E(C) <= 2 E(C_lp) + fl, C_lp the bf16 matmul of the dequantized operands
    lp = (_dequantize(a8.cpu(), sa.cpu(), 1).bfloat16() @ _dequantize(b8.cpu(), sb.cpu(), BLOCK).bfloat16().T).to(out_dtype)
    assert max_err(c.cpu(), ref) <= 2 * max_err(lp, ref) + fl(ref) + 1e-9


@pytest.mark.parametrize("mnk", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32])
def test_gemm_fp8_rowwise_scales(backend, mnk, out_dtype, monkeypatch):
    """torch._scaled_mm's row-wise scales (a_scale (M, 1), b_scale (1, N)), by the same rule."""
    name, device = backend
    monkeypatch.setenv("TILES_POISON", "1")
    M, N, K = mnk
    dt = _format(name)
    g = torch.Generator().manual_seed(M * 5 + N + K)
    a, b = torch.randn(M, K, generator=g), torch.randn(N, K, generator=g)
    sa = a.abs().amax(1, keepdim=True).clamp_min(1e-4) / FMAX[dt]
    sb = b.abs().amax(1, keepdim=True).clamp_min(1e-4) / FMAX[dt]
    a8, b8 = (a / sa).to(dt), (b / sb).to(dt)
    ref = (a8.double() * sa.double()) @ (b8.double() * sb.double()).T
    c = tiles.gemm_fp8(a8.to(device), b8.to(device), sa.to(device), sb.T.contiguous().to(device),
                       out_dtype=out_dtype, backend=name)
    assert c.shape == (M, N) and c.dtype == out_dtype
    lp = ((a8.double() * sa.double()).bfloat16() @ (b8.double() * sb.double()).bfloat16().T).to(out_dtype)
    assert max_err(c.cpu(), ref) <= 2 * max_err(lp, ref) + fl(ref) + 1e-9


def test_gemm_fp8_other_vendors_format_is_refused(backend):
    name, device = backend
    dt = _format(name)
    other = FNUZ if dt == E4M3 else E4M3
    if getattr(backends.get(name), "check_fp8", None) is None:
        pytest.skip(f"backend {name} takes both formats")
    a = torch.zeros(8, 256, dtype=other, device=device)
    b = torch.zeros(16, 256, dtype=other, device=device)
    with pytest.raises(TypeError, match="a has dtype"):
        tiles.gemm_fp8(a, b, torch.ones(8, 2, device=device), torch.ones(1, 2, device=device), backend=name)
