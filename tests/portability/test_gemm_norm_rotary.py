"""gemm, layernorm and rotary against float64 references."""
import pytest
import torch

import tiles
from reference import f32_sum_bound, fl, max_err

GEMM_SHAPES = [(1, 1, 1), (1, 67, 5), (33, 1, 129), (70, 130, 90), (129, 257, 200), (200, 64, 512)]


@pytest.mark.parametrize("mnk", GEMM_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype,out_dtype", [(torch.bfloat16, None), (torch.float16, None), (torch.float16, torch.float32),
                                             (torch.bfloat16, torch.float32), (torch.bfloat16, torch.float16)])
def test_gemm(backend, mnk, dtype, out_dtype):
    name, device = backend
    M, N, K = mnk
    g = torch.Generator().manual_seed(M * 7 + N)
    a = torch.randn(M, K, generator=g).to(dtype).to(device)
    b = torch.randn(K, N, generator=g).to(dtype).to(device)
    c = tiles.gemm(a, b, out_dtype=out_dtype, backend=name)
    assert c.dtype == (out_dtype or dtype) and c.shape == (M, N)
    ref = a.double() @ b.double()
    if c.dtype == torch.float32:  # an f32 result: f32 summation's own bound, not a 16-bit matmul's error
        assert max_err(c, ref) <= f32_sum_bound(a, b) + fl(ref.float())
    else:
        lp = (a @ b).to(c.dtype)
        assert max_err(c, ref) <= 2 * max_err(lp, ref) + fl(ref)


@pytest.mark.parametrize("layout", ["a_t", "b_t", "both", "strided"])
def test_gemm_transposed_operands(backend, layout):
    """Operands as views of other storage: a (M, K) as the .t() of a (K, M) tensor, b as the .t() of an
    (N, K) weight (x @ w.T), both, or every other column. Read in place or copied, by the same rule."""
    name, device = backend
    M, N, K = 70, 136, 96
    g = torch.Generator().manual_seed(len(layout))
    a = torch.randn(M, K, generator=g).bfloat16().to(device)
    b = torch.randn(K, N, generator=g).bfloat16().to(device)
    if layout in ("a_t", "both"):
        a = a.t().contiguous().t()
    if layout in ("b_t", "both"):
        b = b.t().contiguous().t()
    if layout == "strided":
        a, b = torch.cat([a, a], 1)[:, ::2], torch.cat([b, b], 1)[:, ::2]
    assert not (a.is_contiguous() and b.is_contiguous())
    c = tiles.gemm(a, b, backend=name)
    ref = a.double() @ b.double()
    lp = a @ b
    assert max_err(c, ref) <= 2 * max_err(lp, ref) + fl(ref)


def test_gemm_leading_dimensions_with_k0(backend):
    name, device = backend
    a = torch.randn(2, 3, 0, dtype=torch.bfloat16, device=device)
    c = tiles.gemm(a, torch.randn(0, 5, dtype=torch.bfloat16, device=device), backend=name)
    assert c.shape == (2, 3, 5) and not c.any()


@pytest.mark.parametrize("lead", [(3,), (2, 5), (0,)], ids=lambda s: "x".join(map(str, s)))
def test_gemm_leading_dimensions_are_rows(backend, lead):
    """a (..., M, K) @ b (K, N): the activations of a linear layer, (batch, sequence, hidden), as one GEMM
    (a's strided views and gradients too), C (..., M, N)."""
    name, device = backend
    M, N, K = 37, 72, 48
    g = torch.Generator().manual_seed(len(lead) + M)
    x = torch.randn(*lead, M, 2 * K, generator=g).bfloat16().to(device)[..., ::2].requires_grad_()  # strided rows
    w = torch.randn(N, K, generator=g).bfloat16().to(device).requires_grad_()
    c = tiles.gemm(x, w.t(), backend=name)
    assert c.shape == (*lead, M, N) and c.dtype == torch.bfloat16
    ref = x.double() @ w.double().t()
    lp = x @ w.t()
    assert max_err(c, ref) <= 2 * max_err(lp, ref) + fl(ref)
    if c.numel():
        dc = torch.randn(c.shape, generator=g).bfloat16().to(device)
        c.backward(dc)
        rx, rw = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
        (rx @ rw.t()).backward(dc.double())
        lx, lw = x.detach().requires_grad_(), w.detach().requires_grad_()
        (lx @ lw.t()).backward(dc)
        assert max_err(x.grad, rx.grad) <= 2 * max_err(lx.grad, rx.grad) + fl(rx.grad)
        assert max_err(w.grad, rw.grad) <= 2 * max_err(lw.grad, rw.grad) + fl(rw.grad)


def test_gemm_backward(backend):
    name, device = backend
    g = torch.Generator().manual_seed(11)
    a = torch.randn(65, 97, generator=g).to(torch.bfloat16).to(device).requires_grad_()
    b = torch.randn(97, 33, generator=g).to(torch.bfloat16).to(device).requires_grad_()
    dc = torch.randn(65, 33, generator=g).to(torch.bfloat16).to(device)
    tiles.gemm(a, b, backend=name).backward(dc)
    ra, rb = a.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    (ra @ rb).backward(dc.double())
    la, lb = a.detach().requires_grad_(), b.detach().requires_grad_()
    (la @ lb).backward(dc)
    assert max_err(a.grad, ra.grad) <= 2 * max_err(la.grad, ra.grad) + fl(ra.grad)
    assert max_err(b.grad, rb.grad) <= 2 * max_err(lb.grad, rb.grad) + fl(rb.grad)


def test_gemm_empty_and_k0(backend):
    name, device = backend
    a = torch.randn(0, 5, dtype=torch.bfloat16, device=device)
    assert tiles.gemm(a, torch.randn(5, 3, dtype=torch.bfloat16, device=device), backend=name).shape == (0, 3)
    c = tiles.gemm(torch.randn(4, 0, dtype=torch.bfloat16, device=device),
                   torch.randn(0, 3, dtype=torch.bfloat16, device=device), backend=name)
    assert torch.all(c == 0)


@pytest.mark.parametrize("shape", [(1, 1), (3, 5, 300), (17, 1024), (2, 4097)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_layernorm(backend, shape, dtype):
    name, device = backend
    g = torch.Generator().manual_seed(shape[-1])
    x = (torch.randn(shape, generator=g) * 3 + 1).to(dtype).to(device)
    w = torch.randn(shape[-1], generator=g).to(dtype).to(device)
    b = torch.randn(shape[-1], generator=g).to(dtype).to(device)
    y = tiles.layernorm(x, w, b, eps=1e-5, backend=name)
    ref = torch.nn.functional.layer_norm(x.double(), (shape[-1],), w.double(), b.double(), 1e-5)
    torch.testing.assert_close(y, ref.to(dtype))


def test_layernorm_overflow_is_not_silent(backend):
    """An f32 row whose deviations square past f32's range has no f32 answer: it comes out inf / NaN (as
    torch's does), never as the bias alone; the other rows are unaffected."""
    name, device = backend
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 300, generator=g)
    x[1, :5] = 1e20
    x[2] = x[2] * 0.5 + 3.0  # (a constant row is no test of this: 1 / sqrt(eps) magnifies its mean's rounding)
    w, b = torch.randn(300, generator=g), torch.randn(300, generator=g)
    y = tiles.layernorm(x.to(device), w.to(device), b.to(device), backend=name).cpu()
    assert not torch.isfinite(y[1]).all()
    keep = [0, 2, 3]
    ref = torch.nn.functional.layer_norm(x[keep].double(), (300,), w.double(), b.double(), 1e-5)
    torch.testing.assert_close(y[keep], ref.float())


@pytest.mark.parametrize("shape", [(1, 1, 1, 64), (2, 65, 3, 128), (1, 130, 2, 32)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotary(backend, shape, dtype):
    name, device = backend
    B, S, H, D = shape
    g = torch.Generator().manual_seed(S)
    x = torch.randn(shape, generator=g).to(dtype).to(device)
    ang = torch.randn(S, D // 2, generator=g)
    cos, sin = ang.cos().to(device), ang.sin().to(device)
    y = tiles.rotary(x, cos, sin, backend=name)
    x1, x2 = x.double()[..., : D // 2], x.double()[..., D // 2:]
    c, s = cos.double()[None, :, None], sin.double()[None, :, None]
    ref = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)
    torch.testing.assert_close(y, ref.to(dtype))


def _grads(fn, inputs, dy):
    """fn's gradients in every input, by autograd, for a given output gradient."""
    leaves = [t.detach().requires_grad_() for t in inputs]
    fn(*leaves).backward(dy)
    return [t.grad for t in leaves]


@pytest.mark.parametrize("shape", [(3, 5, 300), (17, 1024)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layernorm_backward(backend, shape, dtype):
    """dx, dweight, dbias against float64 autograd of torch's layer_norm (the elementwise rule:
    assert_close's defaults for the dtype)."""
    name, device = backend
    g = torch.Generator().manual_seed(shape[-1] + 1)
    N = shape[-1]
    x = (torch.randn(shape, generator=g) * 3 + 1).to(dtype).to(device)
    w = torch.randn(N, generator=g).to(dtype).to(device)
    b = torch.randn(N, generator=g).to(dtype).to(device)
    dy = torch.randn(shape, generator=g).to(dtype).to(device)
    got = _grads(lambda x, w, b: tiles.layernorm(x, w, b, eps=1e-5, backend=name), (x, w, b), dy)
    ln = torch.nn.functional.layer_norm
    ref = _grads(lambda x, w, b: ln(x, (N,), w, b, 1e-5), (x.double(), w.double(), b.double()), dy.double())
    for n, gt, r in zip(("x", "weight", "bias"), got, ref):
        assert gt.dtype == dtype, n
        torch.testing.assert_close(gt, r.to(dtype), msg=lambda m: f"d{n}: {m}")


@pytest.mark.parametrize("shape", [(2, 65, 3, 128), (1, 130, 2, 32)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotary_backward(backend, shape, dtype):
    """dx (the same kernel rotating back) and the tables' gradients against float64 autograd."""
    name, device = backend
    B, S, H, D = shape
    g = torch.Generator().manual_seed(S + 1)
    x = torch.randn(shape, generator=g).to(dtype).to(device)
    ang = torch.randn(S, D // 2, generator=g)
    cos, sin = ang.cos().to(device), ang.sin().to(device)
    dy = torch.randn(shape, generator=g).to(dtype).to(device)

    def ref_rotary(x, c, s):
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        c, s = c[None, :, None], s[None, :, None]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)

    got = _grads(lambda x, c, s: tiles.rotary(x, c, s, backend=name), (x, cos, sin), dy)
    ref = _grads(ref_rotary, (x.double(), cos.double(), sin.double()), dy.double())
    for n, gt, r, like in zip(("x", "cos", "sin"), got, ref, (x, cos, sin)):
        assert gt.dtype == like.dtype, n
        torch.testing.assert_close(gt, r.to(gt.dtype), msg=lambda m: f"d{n}: {m}")
    # a gradient in x alone takes only the kernel's path (the tables are constants)
    xg = x.detach().requires_grad_()
    tiles.rotary(xg, cos, sin, backend=name).backward(dy)
    assert torch.equal(xg.grad, got[0])
