"""LayerNorm forward over the last axis: y = (x - mean) / sqrt(var + eps) * w + b."""
import math

from tiles.core.lang import (add, add_col, fill_where, load, mask_cols, mul, mul_col, mul_row, row_sum, rsqrt,
                             store, sub_row)
from tiles.core.dtypes import f32
from tiles.core.patterns import Pipelined
from tiles.core.trace import kernel


@kernel(overlap=Pipelined(stages=1))
def layernorm(k, X, W, Bias, Y, eps, *, NP, BM=4):
    """Each program normalizes BM rows held whole in registers; NP (a power of two >= N) is the
    register width, and the columns past N are masked out of the variance."""
    M, N = X.shape
    k.grid(k.cdiv(M, BM))
    r0 = k.let(k.program_id(0) * BM)  # the block's first row (named in the IR's text)

    x = k.reg(BM, NP, f32)
    xc = k.reg(BM, NP, f32)
    sq = k.reg(BM, NP, f32)
    mean = k.vec(BM, f32)
    var = k.vec(BM, f32)
    rstd = k.vec(BM, f32)
    w = k.vec(NP, f32, axis="col")
    b = k.vec(NP, f32, axis="col")

    load(x, X[:, :], row=r0, col=0)
    load(w, W[:], row=0)
    load(b, Bias[:], row=0)
    row_sum(mean, x)
    mul(mean, mean, 1.0 / N)
    sub_row(xc, x, mean)
    mask_cols(xc, 0, N, 0.0)
    mul(sq, xc, xc)
    row_sum(var, sq)
    mul(var, var, 1.0 / N)
    add(var, var, eps)
    rsqrt(rstd, var)
    # deviations whose squares pass f32's range (|x - mean| > ~1.8e19) give var = inf and rstd = 0, which
    # would print the bias as if it were right: an infinite rstd makes those rows inf / NaN instead
    fill_where(rstd, var, "==", math.inf, math.inf)
    mul_row(xc, xc, rstd)
    mul_col(xc, xc, w)
    add_col(xc, xc, b)
    store(Y[:, :], xc, row=r0, col=0)
