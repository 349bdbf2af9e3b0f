"""tiles.gemm_fp8 through the interpreter (the reference semantics) and its input checks."""
import pytest
import torch

import tiles
from tiles.bench import fp8

E4M3 = torch.float8_e4m3fn


def _check(M, N, K, layout, seed, dtype=E4M3):
    x = fp8.make_set(M, N, K, torch.device("cpu"), seed)
    if dtype != E4M3:  # e4m3fnuz tops out at 240, not 448: halve the values, double the scales
        x["a"], x["b"] = (x["a"].float() * 0.5).to(dtype), (x["b"].float() * 0.5).to(dtype)
        x["sa"], x["sb"] = x["sa"] * 2, x["sb"] * 2
        x["a_km"], x["b_kn"] = x["a"].t().contiguous(), x["b"].t().contiguous()
    args = {"kmajor": (x["a"], x["b"], x["sa"], x["sb"]),
            "transposed": (x["a_km"].t(), x["b_kn"].t(), x["sa_km"].t(), x["sb_kn"].t())}[layout]
    c = tiles.gemm_fp8(*args, backend="interp")
    assert c.shape == (M, N) and c.dtype == torch.bfloat16
    ref = fp8.reference(x)
    # TESTING.md: E(C) <= 2 E(C_lp) + fl, C_lp the bf16 matmul of the dequantized operands
    lp = (fp8.dequantize(x["a"], x["sa"], 1).bfloat16() @ fp8.dequantize(x["b"], x["sb"], 128).bfloat16().T).double()
    fl = 2 * ((ref + 0.3 - 0.3) - ref).abs().max().item()
    err = (c.double() - ref).abs().max().item()
    assert err <= 2 * (lp - ref).abs().max().item() + fl + 1e-9, err
    assert torch.equal(c, tiles.gemm_fp8(*args, backend="interp"))


@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (7, 130, 200), (129, 257, 300), (64, 128, 384)])
@pytest.mark.parametrize("layout", ["kmajor", "transposed"])
def test_matches_float64_reference(M, N, K, layout, monkeypatch):
    monkeypatch.setenv("TILES_POISON", "1")  # unwritten elements are NaN and fail
    _check(M, N, K, layout, M * 7 + N + K)


def test_fnuz_format_runs_in_the_interpreter():
    _check(65, 70, 260, "kmajor", 3, dtype=torch.float8_e4m3fnuz)


def test_empty_and_zero_k():
    a, b = torch.zeros(0, 256, dtype=E4M3), torch.zeros(5, 256, dtype=E4M3)
    assert tiles.gemm_fp8(a, b, torch.ones(0, 2), torch.ones(1, 2)).shape == (0, 5)
    c = tiles.gemm_fp8(torch.zeros(3, 0, dtype=E4M3), torch.zeros(5, 0, dtype=E4M3), torch.ones(3, 0),
                       torch.ones(1, 0))
    assert c.shape == (3, 5) and not c.any()


def _bad(**over):
    x = dict(a=torch.zeros(8, 256, dtype=E4M3), b=torch.zeros(16, 256, dtype=E4M3), a_scale=torch.ones(8, 2),
             b_scale=torch.ones(1, 2))
    x.update(over)
    return x


@pytest.mark.parametrize("over,exc,needle", [
    (dict(a=torch.zeros(8, 256, dtype=torch.bfloat16)), TypeError, "a has dtype bfloat16"),
    (dict(a=torch.zeros(8, 256, dtype=torch.float8_e5m2), b=torch.zeros(16, 256, dtype=torch.float8_e5m2)),
     TypeError, "float8_e5m2"),
    (dict(b=torch.zeros(16, 256, dtype=torch.float8_e4m3fnuz)), TypeError, "must share one dtype"),
    (dict(b=torch.zeros(256, 16, dtype=E4M3)), ValueError, "b.t()"),
    (dict(a_scale=torch.ones(2, 8)), ValueError, "a_scale must be (M, cdiv(K, 128)) = (8, 2)"),
    (dict(b_scale=torch.ones(2, 1)), ValueError, "b_scale must be (cdiv(N, 128), cdiv(K, 128)) = (1, 2)"),
    (dict(a_scale=torch.ones(8, 2, dtype=torch.float64)), TypeError, "a_scale has dtype float64"),
    (dict(a=torch.zeros(8, 256, 1, dtype=E4M3)), ValueError, "a must have 2 dimensions"),
    # no backward: a scale that requires grad would lose its gradient
    (dict(a_scale=torch.ones(8, 2, requires_grad=True)), ValueError, "a_scale requires grad, but gemm_fp8 has no backward"),
    (dict(b_scale=torch.ones(1, 2, requires_grad=True)), ValueError, "b_scale.detach()"),
])
def test_bad_input_is_named(over, exc, needle):
    with pytest.raises(exc) as e:
        tiles.gemm_fp8(**_bad(**over))
    assert needle in str(e.value)


def test_scales_requiring_grad_are_fine_without_grad_mode():
    with torch.no_grad():
        c = tiles.gemm_fp8(**_bad(a_scale=torch.ones(8, 2, requires_grad=True)))
    assert c.shape == (8, 16) and not c.requires_grad


def test_out_dtype_checked():
    with pytest.raises(TypeError, match="gemm_fp8 supports: bfloat16, float32"):
        tiles.gemm_fp8(**_bad(), out_dtype=torch.float16)
    c = tiles.gemm_fp8(**_bad(), out_dtype=torch.float32)
    assert c.dtype == torch.float32


def test_hopper_backend_refuses_the_other_vendors_format():
    from tiles.backends.hopper.backend import HopperBackend

    with pytest.raises(TypeError, match="float8_e4m3fnuz is AMD gfx942's format"):
        HopperBackend().check_fp8("a", torch.float8_e4m3fnuz)
    HopperBackend().check_fp8("a", E4M3)


def _check_rowwise(M, N, K, layout, seed):
    x = fp8.make_set(M, N, K, torch.device("cpu"), seed)
    args = {"kmajor": (x["a"], x["b"], x["sa_row"], x["sb_row"]),
            "transposed": (x["a_km"].t(), x["b_kn"].t(), x["sa_row"].t().contiguous().t(),
                           x["sb_row"].t().contiguous().t())}[layout]
    c = tiles.gemm_fp8(*args, backend="interp")
    assert c.shape == (M, N) and c.dtype == torch.bfloat16
    err, bound = fp8.error_and_bound_rowwise(c, x)
    assert err <= bound, (err, bound)
    # not the block-scaled product of the same operands: the two scalings differ where K spans blocks
    return c, x


@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (7, 130, 200), (129, 257, 300)])
@pytest.mark.parametrize("layout", ["kmajor", "transposed"])
def test_rowwise_scales_match_float64_reference(M, N, K, layout, monkeypatch):
    monkeypatch.setenv("TILES_POISON", "1")
    _check_rowwise(M, N, K, layout, M + 11 * N + K)


def test_rowwise_and_block_scales_are_told_apart():
    c, x = _check_rowwise(64, 256, 512, "kmajor", 5)
    block = tiles.gemm_fp8(x["a"], x["b"], x["sa"], x["sb"], backend="interp")
    assert (c.double() - fp8.reference(x)).abs().max() > 10 * (block.double() - fp8.reference(x)).abs().max()


@pytest.mark.parametrize("over,needle", [
    (dict(a_scale=torch.ones(8, 1), b_scale=torch.ones(16, 1)), "b_scale must then be (1, N) = (1, 16)"),
    (dict(a_scale=torch.ones(8, 1), b_scale=torch.ones(1, 15)), "b_scale must then be (1, N) = (1, 16)"),
    (dict(a_scale=torch.ones(1, 8), b_scale=torch.ones(1, 16)), "or (8, 1) with b_scale (1, 16) for row-wise"),
])
def test_bad_rowwise_scales_are_named(over, needle):
    with pytest.raises(ValueError) as e:
        tiles.gemm_fp8(**_bad(**over))
    assert needle in str(e.value)
