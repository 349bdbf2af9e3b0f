"""The fp8 GEMM's 128 x 96 tiles on an sm_90 GPU (skipped elsewhere, with the reason). A 96-wide tile
straddles two B scale blocks wherever 96 tn mod 128 is 32 or 64, and its promotion switches scale at
column group 4 or 8: every column must still take its own block's scale. Checked bitwise against the
128-wide tiles (the same K-block products and the same promotion, per element) at shapes whose tiles
meet all three splits, with M, N and K tails, and against the float64 bound (through tiles.gemm_fp8
where the launcher picks them: test_fp8_scales.py)."""
from __future__ import annotations

import pytest
import torch

import needs  # tests/hopper is on sys.path
from tiles.backends.hopper import lower_fp8


@pytest.mark.parametrize("mnk", [(7, 130, 200), (257, 300, 1000), (300, 520, 640), (1000, 1000, 2048)])
@pytest.mark.parametrize("overlap", [True, False])
def test_96_wide_tiles_store_the_128_wide_tiles_bits(mnk, overlap):
    needs.hopper_gpu()
    from tiles.bench import fp8

    M, N, K = mnk
    x = fp8.make_set(M, N, K, torch.device("cuda"), M + 5 * N + K)
    outs = {}
    for bn in (96, 128):
        out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
        go, out = lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], out=out, BN=bn, epilogue="regs",
                                     wide_stores=4, overlap=overlap, scale_index32=True)
        go()
        outs[bn] = out
    torch.cuda.synchronize()
    assert not torch.isnan(outs[96]).any()
    err, bound = fp8.error_and_bound(outs[96], x)
    assert err <= bound, (err, bound)
    assert torch.equal(outs[96], outs[128])
