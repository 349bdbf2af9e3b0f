"""IR -> CDNA lowering of the suite's GEMM (tiles/kernels/gemm.py), through the backend object."""
from __future__ import annotations

import pytest
import torch

from tiles import backends
from tiles.backends.cdna import compile as cc
from tiles.backends.cdna.backend import CDNABackend
from tiles.backends.cdna.lower import CDNALowering, check_gemm_args
from tiles.core.dtypes import f32
from tiles.core.lang import load_async, mma, store, wait
from tiles.core.lowering import LoweringError
from tiles.core.patterns import Pipelined
from tiles.core.trace import kernel
from tiles.kernels import SUITE

from .conftest import need_clang


def t(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


def lowered(arch="gfx942", dtype=torch.bfloat16, out=torch.bfloat16, **kw):
    be = backends.get("cdna")
    cfg = {**be.config("gemm", arch=arch), **kw}
    return be.lower(SUITE["gemm"], t(1000, 512, dtype=dtype), t(512, 768, dtype=dtype), t(1000, 768, dtype=out), arch=arch, **cfg)


def test_registry_loads_the_cdna_backend():
    be = backends.get("cdna")
    assert isinstance(be, CDNABackend)
    ok, why = be.available()
    assert not ok and why  # no ROCm here
    assert not be.serves(torch.device("cpu"))
    assert be.config("gemm", arch="gfx950") == {"BM": 256, "BN": 256, "BK": 64}


@pytest.mark.parametrize("arch,clang", [("gfx942", 22), ("gfx942", 19), ("gfx950", 22)])
@pytest.mark.parametrize("dtype,out", [(torch.bfloat16, torch.bfloat16), (torch.float16, torch.float32)])
def test_lowered_gemm_compiles(arch, clang, dtype, out):
    need_clang(clang)
    low = lowered(arch, dtype, out)
    assert low.backend == "cdna" and low.arch == arch and low.block == (512, 1, 1)
    assert [k for k, _ in low.args[:3]] == ["ptr"] * 3 and len(low.args) == 3 + 3 * 4
    assert "kernel gemm(" in low.source  # the IR is quoted in the source
    r = cc.compile_hip(low.source, arch, clang)
    din = "bf16" if dtype == torch.bfloat16 else "f16"
    assert r.count("v_mfma_f32_32x32x") == 32 and all(din in m for m in r.counts if m.startswith("v_mfma"))
    assert r.resources["scratch"] == 0 and r.resources["vgpr_spill"] == 0
    assert r.resources["lds"] == low.notes["lds_bytes"]


def test_lowering_is_deterministic():
    assert lowered().source == lowered().source


@kernel(overlap=Pipelined(stages=1))
def _one_tile_mma(k, A, B, C, *, BM=64):
    """An mma kernel no CDNA lowering implements (one tile, no K loop): the GEMM matcher refuses it."""
    k.grid(1)
    a, b, c = k.shared(BM, BM, A.dtype), k.shared(BM, BM, B.dtype), k.reg(BM, BM, f32)
    wait(load_async(a, A[:, :], row=0, col=0), load_async(b, B[:, :], row=0, col=0))
    mma(c, a, b, accumulate=False)
    store(C[:, :], c, row=0, col=0)


def test_unsupported_kernels_and_tiles_raise_clearly():
    with pytest.raises(LoweringError, match="GEMM"):
        backends.get("cdna").lower(_one_tile_mma, t(64, 64), t(64, 64), t(64, 64, dtype=torch.float32), arch="gfx942")
    with pytest.raises(LoweringError, match="LDS"):
        lowered("gfx942", BK=64)  # 128 KiB double buffer > 64 KiB
    with pytest.raises(LoweringError, match="bm must be"):
        lowered("gfx950", BM=64, BN=64)


def test_interleave_pattern_lowers_to_the_4_wave_template():
    # (was refused before the interleave template; tests/cdna/test_interleave.py covers it in depth)
    from tiles.core.patterns import Interleave

    k = SUITE["gemm"].trace(t(256, 256), t(256, 256), t(256, 256), BM=256, BN=256, BK=32)
    import dataclasses

    k2 = dataclasses.replace(k, pattern=Interleave(2))
    low = CDNALowering(k2, "gfx942").lower()
    assert low.block == (256, 1, 1) and low.notes["schedule"] == "interleave4"
    with pytest.raises(LoweringError, match="Interleave"):  # a tile the 4-wave template cannot take says so
        CDNALowering(dataclasses.replace(SUITE["gemm"].trace(t(256, 256), t(256, 256), t(256, 256), BM=192, BN=256, BK=32),
                                         pattern=Interleave(2)), "gfx942").lower()


def test_runtime_contract():
    check_gemm_args(300, 256, 64, 64, 256, 256, ptrs=(0x1000, 0x2000, 0x3000))
    with pytest.raises(ValueError, match="multiples of 8"):
        check_gemm_args(300, 250, 64, 64, 256, 256)
    with pytest.raises(ValueError, match="innermost"):
        check_gemm_args(300, 256, 64, 64, 256, 256, strides_inner=(1, 2, 1))
    with pytest.raises(ValueError, match="aligned"):
        check_gemm_args(300, 256, 64, 64, 256, 256, ptrs=(0x1002, 0, 0))
    with pytest.raises(ValueError, match="2 GiB"):
        check_gemm_args(2**20, 2**11, 2**11, 2**11, 2**11, 2**11)


def test_launch_without_rocm_raises_backend_unavailable():
    from tiles.core.backend import BackendUnavailable

    a = torch.zeros(256, 256, dtype=torch.bfloat16)
    with pytest.raises(BackendUnavailable, match="cdna"):
        backends.get("cdna").launch(SUITE["gemm"], a, a, a)
