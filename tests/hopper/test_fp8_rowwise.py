"""The fp8 GEMM with row-wise scales (tiles/kernels/gemm_fp8.py gemm_fp8_rowwise: a_scale (M, 1), b_scale
(1, N), torch._scaled_mm's form) on Hopper: the block-scaled template with option `rowwise`, where a K
block's promotion is a plain sum and scale_tile multiplies the finished tile by sa[row] * sb[col] once.

On the CPU: the program lowers with the launcher's choice at the issue's five shapes and with every tile
and schedule form, compiles with no spills, and its SASS has the fp8 QGMMA and no FFMA (nothing is
scaled in the loop); option misuse is a named error. On an sm_90 GPU: within the float64 bound on grids
with tails, stream-K shares and both epilogues, through the launcher and through tiles.gemm_fp8
(transposed operands and a strided b_scale included)."""
from __future__ import annotations

import pytest
import torch

import needs  # tests/hopper is on sys.path
import sass
from test_compile import assert_no_spills
from tiles.backends.hopper import lower_fp8, runtime
from tiles.core.lowering import LoweringError

SHAPES = [(1024, 1536, 7168), (1024, 4608, 7168), (6144, 7168, 2304), (6144, 1536, 7168), (8192, 8192, 8192)]
FORMS = {"128": {}, "128_sk_regs": dict(stream_k=True, epilogue="regs", wide_stores=4),
         "96": dict(BN=96, epilogue="regs", wide_stores=4), "192": dict(BM=192),
         "256_pp_sk": dict(BN=256, schedule="pingpong", stream_k=True),
         "256_pp_sk_ds": dict(BN=256, schedule="pingpong", stream_k=True, defer_store=True),
         "256_coop": dict(BN=256)}


def _lowered(M, N, K, **options):
    from tiles import backends
    from tiles.kernels import gemm_fp8_rowwise

    dev = torch.device("meta")
    a, b = torch.empty(M, K, dtype=torch.float8_e4m3fn, device=dev), torch.empty(N, K, dtype=torch.float8_e4m3fn, device=dev)
    sa, sb = torch.empty(M, 1, device=dev), torch.empty(1, N, device=dev)
    c = torch.empty(M, N, dtype=torch.bfloat16, device=dev)
    return backends.get("hopper").lower(gemm_fp8_rowwise, a, b, sa, sb, c, options=options)


def _compiled(low, tmp_path):
    needs.nvrtc()
    comp = runtime.compile_cuda(low.source, name=low.entry + ".cu", cache=False)
    assert_no_spills(comp, low.entry, tmp_path)
    listing = sass.disassemble(comp.cubin, tmp_path)
    assert "QGMMA" in listing and ".E4M3.E4M3" in listing
    assert "FFMA" not in listing, "a scale reached the loop: the row-wise promotion is a plain sum"
    assert "LDL" not in listing and "STL" not in listing
    return listing


@pytest.mark.parametrize("mnk", SHAPES)
def test_the_launchers_choice_lowers_and_compiles(mnk, tmp_path):
    low = _lowered(*mnk, **lower_fp8.launch_options(*mnk, 132, rowwise=True))
    assert low.notes["config"]["rowwise"] and low.entry.endswith("_rw")
    assert "scale_tile(acc" in low.source and "add(acc, acc, part)" in low.source  # the tile program, quoted
    _compiled(low, tmp_path)


@pytest.mark.parametrize("form", list(FORMS))
def test_every_tile_form_compiles(form, tmp_path):
    _compiled(_lowered(1000, 2000, 1024, **FORMS[form]), tmp_path)


def test_option_misuse_is_named():
    with pytest.raises(ValueError, match="rowwise.*scales_tma=False"):
        lower_fp8.fp8_source("bf16", rowwise=True, scales_tma=True)
    with pytest.raises(TypeError, match="rowwise must be True or False"):
        lower_fp8.fp8_source("bf16", rowwise=1)
    with pytest.raises(LoweringError, match="rowwise.*scales_tma=False"):
        _lowered(256, 256, 256, scales_tma=True)
    # the row-wise program is not the block-scaled one: the two never share a kernel
    assert "scale_tile" not in lower_fp8.fp8_source("bf16")["source"]


# tails in M and N (a partial last column tile clamps its column scales), K not a multiple of 128, grids
# that give CTAs several tiles and stream-K shares
CASES = [((1000, 1000, 1024), 4), ((700, 1300, 500), 7), ((129, 257, 300), None), ((1000, 2000, 2304), None),
         ((64, 8, 128), 1)]


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("mnk,grid", CASES)
def test_matches_float64_on_the_gpu(form, mnk, grid):
    needs.hopper_gpu()
    from tiles.bench import fp8

    M, N, K = mnk
    x = fp8.make_set(M, N, K, torch.device("cuda"), M + 5 * N + K)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
    go, out = lower_fp8.launcher(x["a"], x["b"], x["sa_row"], x["sb_row"], out=out, sms=grid, rowwise=True,
                                 **FORMS[form])
    go()
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()
    err, bound = fp8.error_and_bound_rowwise(out, x)
    assert err <= bound, (err, bound)


@pytest.mark.parametrize("mnk", [(6144, 7168, 2304), (1024, 1536, 7168), (333, 517, 1000)])
def test_tiles_gemm_fp8_takes_rowwise_scales_on_the_gpu(mnk):
    """Through tiles.gemm_fp8: K-major operands, then the transposed storage as views with b_scale an
    (N, 1) tensor's view (strided: the launcher's contiguous copy), both within the float64 bound, and
    the two the same bits (the same kernel on the same values)."""
    needs.hopper_gpu()
    import tiles
    from tiles.bench import fp8

    M, N, K = mnk
    x = fp8.make_set(M, N, K, torch.device("cuda"), 7 + M)
    got = tiles.gemm_fp8(x["a"], x["b"], x["sa_row"], x["sb_row"])
    sb_wide = torch.zeros(N, 2, device="cuda")  # b_scale as the view of an (N, 2) tensor's first column: stride 2
    sb_wide[:, 0] = x["sb_row"][0]
    views = tiles.gemm_fp8(x["a_km"].t(), x["b_kn"].t(), x["sa_row"], sb_wide[:, :1].t())
    torch.cuda.synchronize()
    err, bound = fp8.error_and_bound_rowwise(got, x)
    assert err <= bound, (err, bound)
    assert torch.equal(got, views)
