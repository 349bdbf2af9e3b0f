"""Softmax's exponentials split between the SFU and the FMA pipes (lowering option `exp2_fma`, ops.h
`exp2_split`, arch.h `exp2_fma`): on the CPU, the source and the SASS (fewer MUFU.EX2, no spills); on an
sm_90 GPU, arch::exp2_fma against float64 over softmax's whole range, and the attention kernels with
every exponential on the FMA pipes against float64 by the TESTING.md rule."""
from __future__ import annotations

import math
import pathlib
import re
import sys

import pytest
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import needs  # noqa: E402
from test_attention_lower import _lower  # noqa: E402  (skips the module without NVRTC)

from tiles.backends.hopper import runtime  # noqa: E402
from tiles.backends.hopper.lower_attention import WarpSpecializedLowering  # noqa: E402
from tiles.core.lowering import LoweringError  # noqa: E402


def test_option_renders_the_split():
    fwd = _lower(D=128, causal=True, options={"exp2_fma": 2})
    assert "exp2_scaled_row<2>(s, s, " in fwd.source and "x2" in fwd.entry
    assert "exp2(alpha, alpha);" in fwd.source  # the row vector's exponentials stay on the SFU
    dkdv = _lower(D=128, causal=True, kernel="dkdv", options={"exp2_fma": 4})
    assert "exp2_scaled_col<4>(s, s, " in dkdv.source  # a tile held transposed: the column form
    unfolded = _lower(D=64, causal=False, kernel="dkdv", options={"fold": False, "exp2_fma": 8})
    assert "exp2_split<8>(s, s);" in unfolded.source
    plain = _lower(D=128, causal=True)
    assert "exp2_scaled_row(s, s, " in plain.source and "exp2_split" not in plain.source
    for bad in (9, -1, True, 1.5, "2"):
        with pytest.raises(LoweringError, match="exp2_fma"):
            _lower(D=128, causal=True, options={"exp2_fma": bad})


def _ex2_count(low, tmp_path) -> int:
    from test_fp8 import _sass  # tests/hopper is on sys.path

    c = runtime.compile_cuda(low.source, name=low.entry + ".cu", cache=False)
    from test_compile import assert_no_spills
    assert_no_spills(c, low.entry, tmp_path)
    return len(re.findall(r"MUFU\.EX2", _sass(c.cubin, tmp_path)))


@pytest.mark.parametrize("D", [64, 128])
def test_the_split_moves_exponentials_off_the_sfu(D, tmp_path):
    base = _ex2_count(_lower(D=D, causal=False, launched=True), tmp_path)
    half = _ex2_count(_lower(D=D, causal=False, launched=True, options={
        **(WarpSpecializedLowering.SCHEDULES.get(("attention_fwd", D)) or {}), "exp2_fma": 4}), tmp_path)
    # the score tile's exponentials are 64 a thread an iteration (D = 128: 64 x 128 over 128 threads,
    # D = 64 likewise); half of them leave the SFU in the loop
    assert half <= base - 32, (base, half)


PROBE = r"""
#include <tiles/tiles.h>
extern "C" __global__ void exp2_probe(const float* x, float* fma_out, float* sfu_out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) fma_out[i] = tiles::arch::exp2_fma(x[i]), sfu_out[i] = tiles::arch::exp2(x[i]);
}
"""


def test_exp2_fma_against_float64_on_the_gpu():
    needs.hopper_gpu()
    c = runtime.compile_cuda(PROBE, name="exp2_probe.cu")
    k = runtime.load(c.cubin, "exp2_probe")
    grid = torch.linspace(-126.0, 0.0, 1 << 20, dtype=torch.float64).float()
    special = torch.tensor([0.0, -0.0, -0.5, 0.5, -1.0, 1.0, 10.0, -126.5, -127.0, -150.0, -math.inf, math.nan])
    x = torch.cat([grid, torch.rand(1 << 16) * -20, special]).cuda()
    got, sfu = torch.empty_like(x), torch.empty_like(x)
    k.launch(((x.numel() + 255) // 256,), (256,), [runtime.arg_ptr(x), runtime.arg_ptr(got), runtime.arg_ptr(sfu),
                                                   runtime.arg_i32(x.numel())])
    torch.cuda.synchronize()
    ref = torch.exp2(x.double())
    normal = ref >= 2.0 ** -126
    rel = ((got.double() - ref).abs() / ref)[normal]
    assert rel.max().item() <= 1.05e-4, rel.max().item()  # the cubic's minimax error
    tail = got[x < -126.0]
    assert (tail >= 0).all() and (tail <= 2.0 ** -126).all()  # 2^-126 .. 2^-127: flushed toward +0
    n = grid.numel() + (1 << 16)
    s = dict(zip(special.tolist(), got[n:].tolist()))
    assert s[0.0] == 1.0 and s[1.0] == 2.0 and s[10.0] == 1024.0
    assert s[-127.0] == 0.0 and s[-150.0] == 0.0 and s[-math.inf] == 0.0  # a mask's -inf gives +0, as the SFU
    assert math.isnan(got[-1].item()) and math.isnan(sfu[-1].item())  # NaN stays NaN


@pytest.mark.parametrize("fma_pairs", [3, 8])
def test_attention_with_the_split_on_the_gpu(fma_pairs, monkeypatch):
    """The portability suite's forward and backward checks (float64, the TESTING.md rule) with the
    forward, dQ and dK/dV kernels taking `fma_pairs` of every 8 pairs' exponentials on the FMA pipes."""
    needs.hopper_gpu()
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "portability"))
    import test_attention as pt

    schedules = dict(WarpSpecializedLowering.SCHEDULES)
    for name in ("attention_fwd", "attention_bwd_dq", "attention_bwd_dkdv"):
        for D in (64, 128):
            schedules[(name, D)] = {**(schedules.get((name, D)) or {}), "exp2_fma": fma_pairs}
    monkeypatch.setattr(WarpSpecializedLowering, "SCHEDULES", schedules)
    launched = []
    prepare = WarpSpecializedLowering.prepare
    monkeypatch.setattr(WarpSpecializedLowering, "prepare", classmethod(
        lambda cls, kfn, *a, **kw: (launched.append(kw.get("options") or {}), prepare(kfn, *a, **kw))[1]))
    for causal in (False, True):
        for shape in (pt.SHAPES[1], pt.SHAPES[2], pt.SHAPES[3], pt.SHAPES[6]):
            pt.test_forward(("hopper", "cuda"), shape, causal)
        for shape in (pt.SHAPES[2], pt.SHAPES[3]):
            pt.test_backward(("hopper", "cuda"), shape, causal)
    assert launched and all(o.get("exp2_fma") == fma_pairs for o in launched)
