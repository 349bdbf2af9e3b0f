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
from tiles.core.dtypes import bf16, f32
from tiles.core.lowering import LoweringError
from tiles.core.patterns import PingPong


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


@tiles.kernel(overlap=PingPong(stages=2))
def stopped_q(k, Q, K, O, *, CUT=1, COLS=None, BM=128, BN=128):
    """O = (Q' Kᵀ) K tile by tile, Q' = Q's rows before Q.shape[0] - CUT (zeros after): a one-shot load
    through a stopped window, beside a streamed one that is whole. COLS: Q's columns stopped there
    instead (Q[:, :COLS])."""
    k.grid(k.cdiv(Q.shape[0], BM))
    q, kt = k.shared(BM, 64, bf16), k.shared(BN, 64, bf16)
    s, p, o = k.reg(BM, BN, f32), k.reg(BM, BN, bf16), k.reg(BM, 64, f32)
    Qc = Q[:Q.shape[0] - CUT, :] if COLS is None else Q[:, :COLS]
    tiles.wait(tiles.load_async(q, Qc, row=k.program_id(0) * BM, col=0))
    tiles.zero(o)
    for j in k.pipeline(0, k.cdiv(K.shape[0], BN)):
        tiles.wait(tiles.load_async(kt, K[:, :], row=j * BN, col=0))
        tiles.mma(s, q, kt, tb=True, accumulate=False)
        tiles.cast(p, s)
        tiles.mma(o, p, kt, accumulate=True)
    tiles.store(O[:, :], o, row=k.program_id(0) * BM, col=0)


def test_the_hopper_attention_lowering_bounds_its_shared_tiles():
    """The warp-specialized lowering zeroes the rows past a stop in the ring stages its loop streams (the
    ragged cache's K and V) and in a one-shot tile (Q here) after its barrier, before a wgmma reads it;
    a stopped window it cannot bound (along the columns) is refused, not read past."""
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering

    m = torch.empty(256, 64, dtype=torch.bfloat16, device="meta")
    src = WarpSpecializedLowering(stopped_q.trace(m, m, torch.empty(256, 64, device="meta"))).lower().source
    assert re.search(r"wait\(S\.once\[0\], it & 1\);\n\s*if \(pid0 \* 128 \+ 128 > Q_shape0 - 1\) \{  // the box runs "
                     r"past Q\[:Q.shape0 - 1, :\]", src)
    assert re.search(r"zero_rows\(S\.\w+, Q_shape0 - 1 - \(pid0 \* 128\), wg_thread\(\), 128\);", src)

    with pytest.raises(LoweringError, match=r"Q\[:, :60\]: a window stopped short is taken along its rows"):
        WarpSpecializedLowering(stopped_q.trace(m, m, torch.empty(256, 64, device="meta"), COLS=60)).lower()


def test_the_hopper_source_compiles():
    pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC (cuda-python) compiles the Hopper source")
    from tiles.backends.hopper import runtime
    from tiles.backends.hopper.lower_simt import SimtLowering
    meta = torch.empty(40, 32, device="meta")
    for kfn in (copy_stopped, prefix_sums):
        low = SimtLowering(kfn.trace(meta, meta)).lower()
        c = runtime.compile_cuda(low.source, name=f"{low.entry}.cu", cache=False)
        assert c.cubin[:4] == b"\x7fELF"
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering
    m = torch.empty(256, 64, dtype=torch.bfloat16, device="meta")
    low = WarpSpecializedLowering(stopped_q.trace(m, m, torch.empty(256, 64, device="meta"))).lower()
    assert runtime.compile_cuda(low.source, name=f"{low.entry}.cu", cache=False).cubin[:4] == b"\x7fELF"


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


@pytest.mark.skipif(not GPU, reason="needs an NVIDIA GPU (the Hopper warp-specialized kernel)")
@pytest.mark.parametrize("rows,cut", [(256, 1), (200, 100), (256, 0)])
def test_hopper_zeroes_a_one_shot_tile_past_its_stop(rows, cut):
    """stopped_q on the H200 against the interpreter: Q's rows past the stop read as zeros in the one-shot
    tile (NaN there in memory, which a missed zero would carry into O)."""
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering

    be = backends.get("hopper")
    ok, why = be.available()
    if not ok:
        pytest.skip(f"backend hopper not present: {why}")
    g = torch.Generator().manual_seed(rows + cut)
    q = torch.randn(rows, 64, generator=g).to(torch.bfloat16)
    q[rows - cut:] = float("nan")
    kk = (torch.randn(384, 64, generator=g) / 8).to(torch.bfloat16)
    want = torch.zeros(rows, 64)
    backends.get("interp").launch(stopped_q, q, kk, want, CUT=cut)
    got = torch.full((rows, 64), 7.0, device="cuda")
    # the warp-specialized lowering itself (the backend's launch gives a kernel of the user's to the
    # generic one, which refuses the stop: session 47's device run)
    WarpSpecializedLowering.prepare(stopped_q, q.cuda(), kk.cuda(), got, CUT=cut)()
    torch.cuda.synchronize()
    assert not torch.isnan(got).any()
    torch.testing.assert_close(got.cpu(), want, rtol=2e-2, atol=2e-2)
