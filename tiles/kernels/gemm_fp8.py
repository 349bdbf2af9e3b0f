"""Block-scaled 8-bit GEMM: C = (A ∘ SA) @ (B ∘ SB)^T, the DeepSeek-V3 recipe.

A (M, K) and B (N, K) hold 8-bit floats. Each 1 x 128 block of A along K has one f32 scale
(SA, (M, cdiv(K, 128))), each 128 x 128 block of B one (SB, (cdiv(N, 128), cdiv(K, 128))). The
product of one 128-wide K block is summed by the matrix unit (each fp8 x fp8 product is exact in
f32), then scaled by its row scale and its column-block scale and added to the running f32 sum
("promotion" once per K block: the scales differ per block, and the sums inside the matrix unit,
which may keep fewer bits than f32, never run over more than 128 products). C is written in its
own dtype.

SB reaches the kernel as a 3-D view (cdiv(N, 128), 128, cdiv(K, 128)) with stride 0 on the middle
axis: window SB[n, :, kb] is then the 128 per-column scales of tile column n (all equal), a plain
vector load. The public entry point (tiles.gemm_fp8) builds that view; nothing is copied.
"""
from tiles.core.dtypes import f32
from tiles.core.lang import add, load, load_async, mma, mul_col, mul_row, store, wait, zero
from tiles.core.patterns import ProducerConsumer
from tiles.core.trace import kernel

SCALE_BLOCK = 128  # K (and N, for B) elements that share one scale


@kernel(overlap=ProducerConsumer(stages=6, consumers=2))
def gemm_fp8(k, A, B, SA, SB, C, *, BM=128, BN=SCALE_BLOCK, BK=SCALE_BLOCK, group=8):
    """C(M, N) = sum over K blocks kb of SA[:, kb] * (A[:, kb] @ B[:, kb]^T) * SB[:, kb], one BM x BN
    tile of C per program in grouped order. BK is the scale block (one promotion per K block) and BN
    too (one B scale per tile and K block)."""
    M, K = A.shape
    N = B.shape[0]
    tiles_m = k.let(k.cdiv(M, BM))  # named in the IR's text form; the code is the same
    tiles_n = k.let(k.cdiv(N, BN))
    k.grid(tiles_m * tiles_n)
    m, n = k.grouped(k.program_id(0), tiles_m, tiles_n, group)

    acc = k.reg(BM, BN, f32)    # the running sum over K blocks
    part = k.reg(BM, BN, f32)   # one K block's exact product
    a = k.shared(BM, BK, A.dtype)
    b = k.shared(BN, BK, B.dtype)  # K-major, like B itself: the mma reads it transposed
    sa = k.vec(BM, f32, "row")
    sb = k.vec(BN, f32, "col")
    zero(acc)
    for kb in k.pipeline(k.cdiv(K, BK)):
        wait(load_async(a, A[:, :], row=m * BM, col=kb * BK),
             load_async(b, B[:, :], row=n * BN, col=kb * BK))
        load(sa, SA[:, kb], row=m * BM)
        load(sb, SB[n, :, kb])
        mma(part, a, b, tb=True, accumulate=False)
        mul_row(part, part, sa)
        mul_col(part, part, sb)
        add(acc, acc, part)
    store(C[:, :], acc, row=m * BM, col=n * BN)


@kernel(overlap=ProducerConsumer(stages=6, consumers=2))
def gemm_fp8_rowwise(k, A, B, SA, SB, C, *, BM=128, BN=SCALE_BLOCK, BK=SCALE_BLOCK, group=8):
    """C(M, N) = SA[:, 0] * (A @ B^T) * SB[0, :]: one scale per row of A (SA (M, 1)) and per column of
    B (SB (1, N)), torch._scaled_mm's row-wise scaling (per token and per channel). The scales are the
    same for every K block, so they apply once, to the finished tile; the loop still sums each 128-wide
    K block exactly in `part` and adds it to the f32 sum, so no chain inside the matrix unit runs over
    more than 128 products (as gemm_fp8's promotion, with nothing to scale)."""
    M, K = A.shape
    N = B.shape[0]
    tiles_m = k.let(k.cdiv(M, BM))  # named in the IR's text form; the code is the same
    tiles_n = k.let(k.cdiv(N, BN))
    k.grid(tiles_m * tiles_n)
    m, n = k.grouped(k.program_id(0), tiles_m, tiles_n, group)

    acc = k.reg(BM, BN, f32)
    part = k.reg(BM, BN, f32)
    a = k.shared(BM, BK, A.dtype)
    b = k.shared(BN, BK, B.dtype)
    sa = k.vec(BM, f32, "row")
    sb = k.vec(BN, f32, "col")
    zero(acc)
    for kb in k.pipeline(k.cdiv(K, BK)):
        wait(load_async(a, A[:, :], row=m * BM, col=kb * BK),
             load_async(b, B[:, :], row=n * BN, col=kb * BK))
        mma(part, a, b, tb=True, accumulate=False)
        add(acc, acc, part)
    load(sa, SA[:, 0], row=m * BM)
    load(sb, SB[0, :], row=n * BN)
    mul_row(acc, acc, sa)
    mul_col(acc, acc, sb)
    store(C[:, :], acc, row=m * BM, col=n * BN)
