"""C = A @ B: bf16/f16 in, f32 accumulate, C in its own dtype (bf16, f16 or f32)."""
from tiles.core.lang import load_async, mma, store, wait, zero
from tiles.core.dtypes import f32
from tiles.core.patterns import ProducerConsumer
from tiles.core.trace import kernel


@kernel(overlap=ProducerConsumer(stages=4, consumers=2))
def gemm(k, A, B, C, *, BM=128, BN=256, BK=64, group=8):
    """C(M, N) = A(M, K) @ B(K, N), one BM x BN tile of C per program, visited in grouped order so
    that programs running together share rows of A and columns of B in L2."""
    M, K = A.shape
    N = B.shape[1]
    tiles_m = k.let(k.cdiv(M, BM))  # named in the IR's text form; the code is the same
    tiles_n = k.let(k.cdiv(N, BN))
    k.grid(tiles_m * tiles_n)
    m, n = k.grouped(k.program_id(0), tiles_m, tiles_n, group)

    acc = k.reg(BM, BN, f32)
    a = k.shared(BM, BK, A.dtype)
    b = k.shared(BK, BN, B.dtype)
    zero(acc)
    for kb in k.pipeline(k.cdiv(K, BK)):
        wait(load_async(a, A[:, :], row=m * BM, col=kb * BK),
             load_async(b, B[:, :], row=kb * BK, col=n * BN))
        mma(acc, a, b)
    store(C[:, :], acc, row=m * BM, col=n * BN)
