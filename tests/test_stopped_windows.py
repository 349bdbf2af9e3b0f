"""A window stopped short (X[:n]) in a kernel of the user's: elements at or past n read as zeros on every
backend, as the interpreter defines it, or the lowering refuses the kernel by name. Before session 44 the
SIMT lowerings ignored the stop (their views ran to the tensor's end) and read the rows past it.

On the CPU: the interpreter's answer, the SIMT sources' extents on both vendors (a stop that moves with
a loop keeps its window inline), and the refusal of a lowering that does not bound stops. On an NVIDIA
GPU: hopper and cdna-emu (both targets) give the interpreter's answer to the bit."""
from __future__ import annotations

import re

import pytest
import torch

import tiles
from tiles import backends
from tiles.core.lowering import LoweringError


@tiles.kernel
def copy_stopped(k, X, Y, *, CUT=3, BM=16):
    """Y = X's rows before X.shape[0] - CUT (zeros after), by 16-row tiles."""
    k.grid(k.cdiv(X.shape[0], BM))
    r0 = k.program_id(0) * BM
    t = k.reg(BM, 32, tiles.f32)
    tiles.load(t, X[:X.shape[0] - CUT, :], row=r0, col=0)
    tiles.store(Y[:, :], t, row=r0, col=0)


def _want(x, cut):
    want = x.float().clone()
    want[max(x.shape[0] - cut, 0):] = 0
    return want


@pytest.mark.parametrize("rows,cut", [(40, 3), (16, 16), (40, 0), (40, 39)])
def test_the_interpreter_reads_zeros_past_the_stop(rows, cut):
    x = torch.randn(rows, 32)
    y = torch.full_like(x, 7.0)
    backends.get("interp").launch(copy_stopped, x, y, CUT=cut)
    assert torch.equal(y, _want(x, cut))


def test_the_simt_lowerings_end_their_views_at_the_stop():
    meta = torch.empty(40, 32, device="meta")
    kern = copy_stopped.trace(meta, meta)
    from tiles.backends.cdna.lower_simt import SimtLowering as CdnaSimt
    from tiles.backends.hopper.lower_simt import SimtLowering as HopperSimt
    hopper = HopperSimt(kern).lower().source
    assert "simt::view2<const float>{X, true, min(X_shape0 - 3, X_shape0), X_shape1," in hopper
    assert "simt::view2<float>{Y, true, Y_shape0, Y_shape1," in hopper  # the store's window is whole
    cdna = CdnaSimt(kern).lower().source
    assert "simt::window2<dt::f32>(X, 0, imin(X_shape0 - 3, X_shape0), X_shape1," in cdna


@tiles.kernel
def prefix_sums(k, X, Y, *, BM=16):
    """Y's tile j = the sum over i <= j of X's tile i cut 5 rows short (a stop that moves with the loop:
    the window stays inline, not declared before the loop)."""
    k.grid(1)
    acc, t = k.reg(BM, 32, tiles.f32), k.reg(BM, 32, tiles.f32)
    tiles.zero(acc)
    for j in k.range(0, k.cdiv(X.shape[0], BM)):
        tiles.load(t, X[:(j + 1) * BM - 5, :], row=j * BM, col=0)
        tiles.add(acc, acc, t)
        tiles.store(Y[:, :], acc, row=j * BM, col=0)


def test_a_stop_that_moves_with_a_loop_stays_inline():
    meta = torch.empty(40, 32, device="meta")
    kern = prefix_sums.trace(meta, meta)
    from tiles.backends.cdna.lower_simt import SimtLowering as CdnaSimt
    from tiles.backends.hopper.lower_simt import SimtLowering as HopperSimt
    hopper = HopperSimt(kern).lower().source
    assert "const auto gX" not in hopper
    assert re.search(r"simt::load<float>\(\w+, simt::view2<const float>\{X, true, min\(\((\w+) \+ 1\) \* 16 - 5, "
                     r"X_shape0\)", hopper)
    assert "const auto gX" not in CdnaSimt(kern).lower().source
    x, y = torch.randn(40, 32), torch.zeros(40, 32)
    backends.get("interp").launch(prefix_sums, x, y)
    want, acc = torch.zeros(40, 32), torch.zeros(16, 32)
    for j in range(3):
        t = torch.zeros(16, 32)
        rows = x[j * 16:min((j + 1) * 16 - 5, 40)]  # the tile's rows before the stop
        t[:rows.shape[0]] = rows
        acc = acc + t
        n = min(16, 40 - j * 16)
        want[j * 16:j * 16 + n] = acc[:n]
    assert torch.equal(y, want)


def test_a_lowering_that_does_not_bound_stops_refuses_them():
    from tiles.backends.hopper.lower import HopperLowering
    kern = copy_stopped.trace(torch.empty(40, 32, device="meta"), torch.empty(40, 32, device="meta"))
    with pytest.raises(LoweringError, match=r"reads X\[:X.shape0 - 3, :\], a window stopped short .* \(HopperLowering\) "
                                            r"does not bound"):
        HopperLowering(kern)


def test_the_hopper_attention_lowering_bounds_only_its_streamed_loads():
    """The warp-specialized lowering zeroes the rows past a stop in the ring stages its loop streams
    (the ragged cache's K and V); a stopped window anywhere else there is refused, not read past."""
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering
    from tiles.core.dtypes import bf16, f32
    from tiles.core.patterns import PingPong

    @tiles.kernel(overlap=PingPong(stages=2))
    def stopped_q(k, Q, K, O, *, BM=128, BN=128):
        k.grid(k.cdiv(Q.shape[0], BM))
        q, kt = k.shared(BM, 64, bf16), k.shared(BN, 64, bf16)
        s, p, o = k.reg(BM, BN, f32), k.reg(BM, BN, bf16), k.reg(BM, 64, f32)
        tiles.wait(tiles.load_async(q, Q[:Q.shape[0] - 1, :], row=k.program_id(0) * BM, col=0))
        tiles.zero(o)
        for j in k.pipeline(0, k.cdiv(K.shape[0], BN)):
            tiles.wait(tiles.load_async(kt, K[:, :], row=j * BN, col=0))
            tiles.mma(s, q, kt, tb=True, accumulate=False)
            tiles.cast(p, s)
            tiles.mma(o, p, kt, accumulate=True)
        tiles.store(O[:, :], o, row=k.program_id(0) * BM, col=0)

    m = torch.empty(256, 64, dtype=torch.bfloat16, device="meta")
    with pytest.raises(LoweringError, match=r"load_async through Q\[:Q.shape0 - 1, :\]: a window stopped short is "
                                            r"bounded here only where the pipelined loop streams it"):
        WarpSpecializedLowering(stopped_q.trace(m, m, torch.empty(256, 64, device="meta"))).lower()


def test_the_hopper_source_compiles():
    pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC (cuda-python) compiles the Hopper source")
    from tiles.backends.hopper import runtime
    from tiles.backends.hopper.lower_simt import SimtLowering
    meta = torch.empty(40, 32, device="meta")
    for kfn in (copy_stopped, prefix_sums):
        low = SimtLowering(kfn.trace(meta, meta)).lower()
        c = runtime.compile_cuda(low.source, name=f"{low.entry}.cu", cache=False)
        assert c.cubin[:4] == b"\x7fELF"


GPU = torch.cuda.is_available() and getattr(torch.version, "hip", None) is None


@pytest.mark.skipif(not GPU, reason="needs an NVIDIA GPU (hopper, and cdna-emu's emulated CDNA kernels)")
@pytest.mark.parametrize("name", ["hopper", "cdna-emu:gfx942", "cdna-emu:gfx950"])
@pytest.mark.parametrize("rows,cut", [(40, 3), (16, 16), (40, 39)])
def test_the_gpu_backends_read_zeros_past_the_stop(name, rows, cut):
    be = backends.get(name)
    ok, why = be.available()
    if not ok:
        pytest.skip(f"backend {name} not present: {why}")
    x = torch.randn(rows, 32, device="cuda")
    y = torch.full_like(x, 7.0)
    be.launch(copy_stopped, x, y, CUT=cut)
    torch.cuda.synchronize()
    assert torch.equal(y.cpu(), _want(x.cpu(), cut))
    want = torch.zeros(rows, 32)
    backends.get("interp").launch(prefix_sums, x.cpu(), want)
    be.launch(prefix_sums, x, y)  # a stop that moves with the loop: the same f32 sums in the same order
    torch.cuda.synchronize()
    assert torch.equal(y.cpu(), want)
