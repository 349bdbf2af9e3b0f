"""Rotary position embedding forward (GPT-NeoX, non-interleaved halves) on (B, S, H, D) tensors."""
from tiles.core.lang import add, load, mul, store, sub
from tiles.core.dtypes import f32
from tiles.core.patterns import Pipelined
from tiles.core.trace import kernel


@kernel(overlap=Pipelined(stages=1))
def rotary(k, X, Cos, Sin, Y, *, D, BM=64):
    """y1 = x1*cos - x2*sin, y2 = x2*cos + x1*sin, where x1, x2 are the two halves of the head dim
    and cos, sin are (S, D/2) tables."""
    Bsz, S, H = X.shape[0], X.shape[1], X.shape[2]
    half = D // 2
    k.grid(k.cdiv(S, BM), H, Bsz)
    r0 = k.let(k.program_id(0) * BM)  # the block's first position (named in the IR's text)
    h, b = k.program_id(1), k.program_id(2)

    x1 = k.reg(BM, half, f32)
    x2 = k.reg(BM, half, f32)
    cos = k.reg(BM, half, f32)
    sin = k.reg(BM, half, f32)
    y1 = k.reg(BM, half, f32)
    y2 = k.reg(BM, half, f32)
    t = k.reg(BM, half, f32)

    load(x1, X[b, :, h, :], row=r0, col=0)
    load(x2, X[b, :, h, :], row=r0, col=half)
    load(cos, Cos[:, :], row=r0, col=0)
    load(sin, Sin[:, :], row=r0, col=0)
    mul(y1, x1, cos)
    mul(t, x2, sin)
    sub(y1, y1, t)
    mul(y2, x2, cos)
    mul(t, x1, sin)
    add(y2, y2, t)
    store(Y[b, :, h, :], y1, row=r0, col=0)
    store(Y[b, :, h, :], y2, row=r0, col=half)
