"""The IR lowering of the suite's GEMM onto the Hopper template (CPU: tracing needs only meta tensors)."""
from __future__ import annotations

import shutil
import subprocess

import pytest
import torch

from tiles import backends
from tiles.core.lowering import LoweringError
from tiles.core.patterns import Pipelined, ProducerConsumer
from tiles.core.trace import kernel
from tiles.core.lang import load_async, mma, store, wait, zero
from tiles.core.dtypes import f32
from tiles.kernels import SUITE, gemm


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


@pytest.fixture(scope="module")
def hopper():
    return backends.get("hopper")


def lowered(hopper, M=4096, N=4096, K=4096, dt=torch.bfloat16, out=torch.bfloat16, kfn=gemm, **kw):
    return hopper.lower(kfn, meta(M, K, dtype=dt), meta(K, N, dtype=dt), meta(M, N, dtype=out), **kw)


def test_gemm_lowers_to_the_template(hopper):
    lo = lowered(hopper)
    assert lo.backend == "hopper" and lo.arch == "sm_90a" and lo.block == (384, 1, 1)
    assert "asm" not in lo.source  # the source speaks tiles' headers; PTX lives in arch.h only
    assert "mma_AB(acc, S.a[pos.stage]" in lo.source and "load_async(S.a[pos.stage]" in lo.source
    assert "mma(acc, a, b, accumulate=True)" in lo.source.split("#include")[0]  # the IR, in the header
    cfg = lo.notes["config"]
    assert (cfg["BM"], cfg["BN"], cfg["BK"], cfg["stages"], cfg["consumers"], cfg["group_m"]) == (128, 256, 64, 4, 2, 8)


def test_narrow_tiles_store_from_registers_four_pairs_a_store(hopper):
    # the small outputs' 128 x 64 tiles (config's choice at 1024^3): the register epilogue with
    # ops.h store_wide<4>, measured faster than the TMA store there; 128 x 256 keeps the TMA store
    lo = lowered(hopper, M=1024, N=1024, K=1024, BN=64)
    assert (lo.notes["config"]["epilogue"], lo.notes["config"]["wide_stores"]) == ("regs", 4)
    assert "#define TILES_WIDE_STORES 4" in lo.source
    wide = lowered(hopper)
    assert (wide.notes["config"]["epilogue"], wide.notes["config"]["wide_stores"]) == ("tma", 0)
    assert "TILES_WIDE_STORES" not in wide.source
    forced = lowered(hopper, M=1024, N=1024, K=1024, BN=64, options=dict(epilogue="tma"))
    assert forced.notes["config"]["epilogue"] == "tma"


@pytest.mark.parametrize("dt,out", [(torch.float16, torch.float32), (torch.bfloat16, torch.float16)])
def test_dtypes(hopper, dt, out):
    lo = lowered(hopper, dt=dt, out=out)
    assert lo.notes["gemm_kernel"].in_t == {torch.float16: "f16", torch.bfloat16: "bf16"}[dt]


def test_lowered_source_compiles(hopper):
    pytest.importorskip("cuda.bindings.nvrtc")
    from tiles.backends.hopper import runtime
    lo = lowered(hopper, options=dict(epilogue="regs", cluster=1))
    c = runtime.compile_cuda(lo.source, name=lo.entry + ".cu", cache=False)
    assert len(c.cubin) > 1000


def test_emit_builds_with_nvcc(hopper, tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    lo = lowered(hopper)
    paths = hopper.emit(lo, str(tmp_path))
    p = subprocess.run(["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-std=c++17", f"-I{tmp_path}",
                        paths[0], "-o", str(tmp_path / "k.cubin")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_refusals_say_why(hopper, monkeypatch):
    with pytest.raises(LoweringError, match="BK must be 64"):
        lowered(hopper, BK=32)
    with pytest.raises(LoweringError, match="registers a thread"):
        lowered(hopper, BM=256, BN=256)
    # every suite kernel has a Hopper lowering now: take one away to see the message
    from tiles.backends.hopper import backend as hopper_backend
    monkeypatch.delitem(hopper_backend.LOWERINGS, "attention_bwd_dkdv")
    with pytest.raises(LoweringError, match="has no Hopper lowering yet"):
        q = meta(1, 128, 2, 64)
        lse = meta(1, 2, 128, dtype=torch.float32)
        hopper.lower(SUITE["attention_bwd_dkdv"], q, q, q, q, lse, lse, q, q, 0.125, causal=False, D=64)


@kernel(overlap=Pipelined(stages=3))
def gemm_pipelined(k, A, B, C, *, BM=128, BN=128, BK=64):
    M, K = A.shape
    N = B.shape[1]
    k.grid(k.cdiv(M, BM) * k.cdiv(N, BN))
    pid = k.program_id(0)
    m, n = pid // k.cdiv(N, BN), pid % k.cdiv(N, BN)
    acc = k.reg(BM, BN, f32)
    a = k.shared(BM, BK, A.dtype)
    b = k.shared(BK, BN, B.dtype)
    zero(acc)
    for kb in k.pipeline(k.cdiv(K, BK)):
        wait(load_async(a, A[:, :], row=m * BM, col=kb * BK), load_async(b, B[:, :], row=kb * BK, col=n * BN))
        mma(acc, a, b)
    store(C[:, :], acc, row=m * BM, col=n * BN)


@kernel(overlap=ProducerConsumer(stages=4, consumers=2))
def gemm_misses_tiles(k, A, B, C, *, BM=128, BN=256, BK=64):
    M, K = A.shape
    N = B.shape[1]
    k.grid(k.cdiv(M, BM) * k.cdiv(N, BN))
    pid = k.program_id(0)
    acc = k.reg(BM, BN, f32)
    a = k.shared(BM, BK, A.dtype)
    b = k.shared(BK, BN, B.dtype)
    zero(acc)
    for kb in k.pipeline(k.cdiv(K, BK)):
        wait(load_async(a, A[:, :], row=(pid % 2) * BM, col=kb * BK), load_async(b, B[:, :], row=kb * BK, col=0))
        mma(acc, a, b)
    store(C[:, :], acc, row=(pid % 2) * BM, col=0)


def test_other_patterns_and_tile_orders(hopper):
    lo = lowered(hopper, kfn=gemm_pipelined)
    # the declared 3 stages are the least: the ring deepens while shared memory allows (128 x 128: 6)
    assert lo.notes["config"]["stages"] == 6 and lo.notes["config"]["consumers"] == 2
    assert lowered(hopper, kfn=gemm_pipelined, options={"stages": 3}).notes["config"]["stages"] == 3
    with pytest.raises(LoweringError, match="exactly once"):
        lowered(hopper, kfn=gemm_misses_tiles)


def test_tile_width_fills_the_sms():
    """Narrower tiles where 128 x 256 ones leave SMs idle (bench/hopper_gemm_tiles.py measured it), the
    ring then as deep as shared memory allows; the issue's five shapes keep 128 x 256 with 4 stages."""
    from tiles.backends.hopper.lower import HopperLowering

    want = {(1024, 1024, 1024): (64, 8), (1024, 1024, 8192): (64, 8), (2048, 1024, 512): (128, 6),
            (2048, 2048, 2048): (256, 4), (4096, 4096, 4096): (256, 4), (8192, 8192, 8192): (256, 4),
            (16384, 8192, 8192): (256, 4), (8192, 8192, 2048): (256, 4), (4096, 14336, 4096): (256, 4)}
    for (M, N, K), (bn, stages) in want.items():
        cfg = HopperLowering.config("gemm", M=M, N=N, K=K)
        assert cfg.get("BN", 256) == bn, (M, N, K, cfg)
        a, b, c = (torch.empty(*s, dtype=torch.bfloat16, device="meta") for s in ((M, K), (K, N), (M, N)))
        low = backends.get("hopper").lower(gemm, a, b, c, **cfg)
        assert low.notes["config"]["BN"] == bn and low.notes["config"]["stages"] == stages
        assert low.notes["config"]["cluster"] == (1 if bn == 64 else 2)  # multicast splits B in 64-column pairs
        # 128 x 256 tiles: 16 tile rows at a time, each tile stored under the next one's first k-block
        assert (low.notes["config"]["group_m"], low.notes["config"]["deferred_store"]) == \
            ((16, True) if bn == 256 else (8, False)), (M, N, K, low.notes["config"])
    assert HopperLowering.config("layernorm", M=1024, N=1024) == {}


def test_deferred_store_only_for_16_bit_outputs():
    """A packed 16-bit tile beside the next accumulator fits the registers; an f32 one would not, so
    f32 outputs keep the store right after the tile."""
    for out, deferred in ((torch.bfloat16, True), (torch.float16, True), (torch.float32, False)):
        dt = torch.float16 if out == torch.float16 else torch.bfloat16
        low = lowered(backends.get("hopper"), M=8192, N=8192, K=8192, dt=dt, out=out)
        assert low.notes["config"]["deferred_store"] is deferred
        assert ("under the next tile's first k-block" in low.source.split("#include")[0]) is deferred
