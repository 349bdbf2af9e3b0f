"""Flash attention, forward and backward, on FlashAttention's (batch, seq, heads, head_dim) layout.

Scores live in the log2 domain (scale·log2(e) folded into one multiply) so the exponentials are exp2,
the native instruction on both vendors. Causal masks align bottom-right (key c is visible to query r
when c <= r + Sk - Sq); a query row with no visible key produces zeros and LSE = +inf, FlashAttention's
convention, which makes its backward contributions exactly zero.
"""
import math

from tiles.core.dtypes import f32
from tiles.core.lang import (add, cast, copy, div_row, exp2, fill, fill_where, load, load_async, log2,
                             mask_causal, mask_cols, mask_rows, mask_window, mma, mul, mul_row, row_max, row_sum,
                             store, store_add, sub, sub_row, wait, zero)
from tiles.core.patterns import Pipelined, PingPong
from tiles.core.trace import kernel

LOG2E = math.log2(math.e)
LN2 = math.log(2.0)
# m starts finite so that a row that is masked so far gives exp2(-inf - m) = 0, never NaN.
M_INIT = -1.0e30


def _kv_blocks(k, row0, BM, BN, Sq, Sk, causal, right=None):
    """Key blocks a query block [row0, row0+BM) must visit: up to its last row's diagonal (causal), or
    `right` keys past it (a sliding window's right edge)."""
    n = k.cdiv(Sk, BN)
    if not causal and right is None:
        return n
    return k.max(k.min(n, k.cdiv(row0 + BM + Sk - Sq + (0 if causal else right), BN)), 0)


def _first_kv_block(k, row0, BN, Sq, Sk, left=None):
    """The first key block a query block sees: 0, or with a sliding window of `left` keys before each row's
    diagonal, the block of its first row's first key."""
    return 0 if left is None else k.max(row0 + Sk - Sq - left, 0) // BN


def _seq_k(k, K, KLen, b, Pages=None):
    """(the sequence's first key in K, the keys it attends): key 0 and all of K's rows, or (a cache of
    ragged lengths) the first KLen[b], clamped to the cache's keys (K's rows, or a paged cache's
    Pages.shape[1] pages of K.shape[1] keys) so that no count reads past it."""
    if KLen is None:
        return 0, K.shape[1]
    keys = K.shape[1] if Pages is None else Pages.shape[1] * K.shape[1]
    return 0, k.let(k.max(k.min(k.read(KLen, b, bound=keys), keys), 0), "seq_k")


def _block_row(k, Blocks, Q, K, L, Pages=None, first="row0"):
    """Packed sequences' programs, one a block of a sequence's query rows (the forward, dQ) or keys (dK /
    dV): (sequence b, its first query row q0, its query count, its first key k0, its key count, the
    block's first row or key within the sequence) from row pid0 of Blocks (n, 6) int32, which the host
    builds from the offsets (api._blocks: the blocks that exist, heaviest first, then empty rows). A grid over the blocks that exist, not the longest sequence's blocks for every
    sequence: no program is empty but the last few. Each value is clamped into the packed rows (Q (1,
    total_q, H, D); K (1, total_k, H_kv, D), or a paged cache's keys a sequence, k0 then 0) and L's (B, H,
    max_seqlen_q), so that no program reads or writes past them whatever the table holds."""
    total_q, Bsz, longest = Q.shape[1], L.shape[0], L.shape[2]
    total_k = K.shape[1] if Pages is None else Pages.shape[1] * K.shape[1]
    p = k.program_id(0)
    b = k.let(k.max(k.min(k.read(Blocks, p, 0, bound=0), Bsz - 1), 0), "b")
    q0 = k.let(k.max(k.min(k.read(Blocks, p, 1, bound=0), total_q), 0), "q0")
    Sq = k.let(k.max(k.min(k.min(k.read(Blocks, p, 2, bound=longest), longest), total_q - q0), 0), "seq_q")
    k0 = 0 if Pages is not None else k.let(k.max(k.min(k.read(Blocks, p, 3, bound=0), total_k), 0), "k0")
    Sk = k.let(k.max(k.min(k.read(Blocks, p, 4, bound=total_k), total_k - k0), 0), "seq_k")
    at = k.let(k.max(k.min(k.read(Blocks, p, 5, bound=0), total_k if first == "kcol0" else longest), 0), first)
    return b, q0, Sq, k0, Sk, at


def _kv_windows(k, K, V, KLen, Pages, packed, b, hk, k0, Sk, j, BN):
    """(K's window, V's window, the row of key block j in them) for sequence b and key / value head hk.
    Packed sequences (`packed`; k0: the sequence's first key) stop their windows at the sequence's last key
    (K[0, :k0 + Sk, hk, :]), so that a block running past it reads zeros, not the next sequence's keys.
    A cache of ragged lengths stops its windows at the sequence's count (K[b, :Sk, hk, :]): a tile that
    runs past it reads zeros there, as past the tensor's end, whatever the cache holds (NaN included:
    it would meet P's exact zeros in P V). A paged cache (Pages (B, pages) int32, K (pages in the
    pool, page size, H_kv, D)) holds key block j in page Pages[b, j · BN / page size] of the pool; the
    page size is a multiple of BN, so a block lies in one page, and the page number read is clamped
    into the pool."""
    if Pages is None:
        if packed:
            return K[0, :k0 + Sk, hk, :], V[0, :k0 + Sk, hk, :], k0 + j * BN
        if KLen is None:
            return K[b, :, hk, :], V[b, :, hk, :], j * BN
        return K[b, :Sk, hk, :], V[b, :Sk, hk, :], j * BN
    size = K.shape[1]
    blk = k.let(k.min((j * BN) // size, Pages.shape[1] - 1))  # an entry of the table (a fetch past the end stays in it)
    page = k.let(k.max(k.min(k.read(Pages, b, blk, bound=K.shape[0]), K.shape[0] - 1), 0))
    first = k.let(blk * size)  # the page's first key
    stop = k.max(Sk - first, 0)  # the sequence's keys in this page
    return K[page, :stop, hk, :], V[page, :stop, hk, :], j * BN - first


@kernel(overlap=PingPong(stages=2))
def attention_fwd(k, Q, K, V, O, L, scale, KLen=None, Pages=None, Blocks=None, *, causal, D, BM=128, BN=128,
                  left=None, right=None):
    """O = softmax(scale · Q Kᵀ) V per (batch, head); L = log-sum-exp of each row (B, H, Sq) f32.
    Query heads share key/value heads in groups of H / H_kv (GQA, MQA). With KLen (B,) int32, sequence
    b attends the first KLen[b] keys of its rows of K and V (a KV cache of ragged lengths); the causal
    mask then aligns each sequence's rows bottom-right to its own keys. With Pages (B, pages) int32 as
    well, K and V are a pool of pages (pages, page size, H_kv, D) and sequence b's keys are in the pool's
    pages Pages[b, 0], Pages[b, 1], ... (a paged cache; the page size a multiple of BN). Packed
    sequences (FlashAttention's varlen): with Blocks (n, 6) int32, one row a block of BM query rows of a
    sequence (_block_row), Q and O are (1, total, H, D) and a sequence's queries are consecutive rows of
    them; L is (B, H, max_seqlen_q), its rows past a sequence's count left unwritten. K and V are then (1,
    total, H_kv, D), a sequence's keys consecutive rows, or (with Pages) a pool of pages, the table's
    key counts those of the sequences' pages. A sliding window
    (FlashAttention's window_size): with `left`, row r sees no key before its bottom-right diagonal minus
    left; with `right` (not causal), none after the diagonal plus right; the loop visits only the key
    blocks between."""
    H, Hkv = Q.shape[2], K.shape[2]
    if Blocks is None:
        k.grid(k.cdiv(Q.shape[1], BM), H, Q.shape[0])
        qb, h, b = k.program_id(0), k.program_id(1), k.program_id(2)
        hk = k.let(h // (H // Hkv))  # the key / value head (named in the IR's text form)
        row0 = k.let(qb * BM)
        q0, Sq = 0, Q.shape[1]
        k0, Sk = _seq_k(k, K, KLen, b, Pages)
        bq = b  # Q's and O's batch index
    else:  # a grid over the query blocks that exist (the table's rows), heads
        k.grid(Blocks.shape[0], H)
        h, bq = k.program_id(1), 0
        hk = k.let(h // (H // Hkv))
        b, q0, Sq, k0, Sk, row0 = _block_row(k, Blocks, Q, K, L, Pages)

    q = k.shared(BM, D, Q.dtype)
    kt = k.shared(BN, D, K.dtype)
    vt = k.shared(BN, D, V.dtype)
    s = k.reg(BM, BN, f32)
    p = k.reg(BM, BN, Q.dtype)
    o = k.reg(BM, D, f32)
    m = k.vec(BM, f32)
    m_new = k.vec(BM, f32)
    alpha = k.vec(BM, f32)
    l = k.vec(BM, f32)

    # a packed sequence's last block reads the next one's rows of Q: theirs are never stored
    wait(load_async(q, Q[bq, :, h, :], row=q0 + row0, col=0))
    zero(o)
    zero(l)
    fill(m, M_INIT)
    first = _first_kv_block(k, row0, BN, Sq, Sk, left)
    stop = _kv_blocks(k, row0, BM, BN, Sq, Sk, causal, right)
    if Blocks is not None:  # the table's empty rows (past every sequence's blocks) visit no key block
        stop = first + k.max(stop - first, 0) * k.min(k.max(Sq - row0, 0), 1)
    # the key blocks may be cut into parts (the last wave of a persistent walk, short grids):
    # each part's O, normalized by its own sum, and L merge by their log-sum-exp
    for j in k.pipeline(first, stop, merge=k.lse_merge(O, L)):
        Kc, Vc, row = _kv_windows(k, K, V, KLen, Pages, Blocks is not None, b, hk, k0, Sk, j, BN)
        wait(load_async(kt, Kc, row=row, col=0),
             load_async(vt, Vc, row=row, col=0))
        mma(s, q, kt, tb=True, accumulate=False)
        mul(s, s, scale * LOG2E)
        mask_cols(s, j * BN, Sk)
        if causal or right is not None:
            mask_causal(s, row0, j * BN, Sk - Sq + (0 if causal else right))
        if left is not None:
            mask_window(s, row0, j * BN, Sk - Sq - left)
        row_max(m_new, s, m)
        sub(alpha, m, m_new)
        exp2(alpha, alpha)
        sub_row(s, s, m_new)
        exp2(s, s)
        mul(l, l, alpha)
        row_sum(l, s, l)
        mul_row(o, o, alpha)
        cast(p, s)
        mma(o, p, vt)
        copy(m, m_new)
    div_row(o, o, l)
    if Blocks is None:
        store(O[b, :, h, :], o, row=row0, col=0)
    else:  # the sequence's own rows only: the rows after them are the next sequence's
        store(O[0, :q0 + Sq, h, :], o, row=q0 + row0, col=0)
    # L = (m + log2 l) · ln 2, and +inf where the row saw no key.
    log2(alpha, l)
    add(alpha, alpha, m)
    mul(alpha, alpha, LN2)
    fill_where(alpha, l, "==", 0.0, math.inf)
    store(L[b, h, :] if Blocks is None else L[b, h, :Sq], alpha, row=row0)


@kernel(overlap=Pipelined(stages=1))
def attention_bwd_prep(k, O, dO, Delta, *, D, BM=64):
    """Delta[b, h, r] = sum_d dO[r, d] · O[r, d], the row term of softmax's backward."""
    Bsz, Sq, H = O.shape[0], O.shape[1], O.shape[2]
    k.grid(k.cdiv(Sq, BM), H, Bsz)
    row0 = k.let(k.program_id(0) * BM)
    h, b = k.program_id(1), k.program_id(2)
    o = k.reg(BM, D, f32)
    do = k.reg(BM, D, f32)
    delta = k.vec(BM, f32)
    load(o, O[b, :, h, :], row=row0, col=0)
    load(do, dO[b, :, h, :], row=row0, col=0)
    mul(o, o, do)
    row_sum(delta, o)
    store(Delta[b, h, :], delta, row=row0)


def _probabilities(k, s, p, q, kt, lse, qrow0, kcol0, Sq, Sk, scale, causal, left=None, right=None):
    """s = scale·log2(e)·q kᵀ, masked (the forward's masks: causal or a sliding window's edges);
    p = exp2(s - lse·log2(e)) (zero where masked)."""
    mma(s, q, kt, tb=True, accumulate=False)
    mul(s, s, scale * LOG2E)
    mask_cols(s, kcol0, Sk)
    if causal or right is not None:
        mask_causal(s, qrow0, kcol0, Sk - Sq + (0 if causal else right))
    if left is not None:
        mask_window(s, qrow0, kcol0, Sk - Sq - left)
    sub_row(s, s, lse)
    exp2(s, s)
    mask_rows(s, qrow0, Sq, 0.0)
    cast(p, s)


def _dscores(k, ds, dsp, dp, s, do, vt, delta, rows=None):
    """dS = P ∘ (dO Vᵀ − Delta), rounded to the input dtype for the next mma. `rows` = (row0, limit): the
    rows from limit on set to zero (packed sequences: Delta there is the next sequence's, and P's zero
    times its NaN would be NaN, summed into every dK row)."""
    mma(dp, do, vt, tb=True, accumulate=False)
    sub_row(dp, dp, delta)
    mul(ds, dp, s)
    if rows is not None:
        mask_rows(ds, rows[0], rows[1], 0.0)
    cast(dsp, ds)


def _q_blocks(k, kcol0, BM, BN, Sq, Sk, causal, left=None, right=None):
    """(first, stop): the query blocks that see key block [kcol0, kcol0 + BN): from the first row whose
    diagonal (plus a window's right edge) reaches it, to the last whose window's left edge does."""
    first = 0
    if causal or right is not None:
        first = k.max(kcol0 - (Sk - Sq) - (0 if causal else right), 0) // BM
    stop = k.cdiv(Sq, BM)
    if left is not None:
        stop = k.min(stop, k.cdiv(k.max(kcol0 + BN - (Sk - Sq) + left, 0), BM))  # rows up to kcol0 + BN - 1 - (Sk - Sq) + left
    return first, stop


def _dkdv(k, Q, K, V, dO, L, Delta, dK, dV, scale, causal, D, BM, BN, dQacc=None, left=None, right=None,
          Blocks=None):
    """dK, dV for one key block of one KV head, looping over the query heads of its group and the
    query blocks that can see it; with dQacc, also each query block's share of dQ = dS K, added into
    dQacc (f32) as it is made. With Blocks (packed sequences, _block_row), the key block of one
    sequence: Q, dO, K, V, dK and dV are (1, total, heads, D), Delta (1, H, total_q), and L the
    forward's (B, H, max_seqlen_q)."""
    H, Hkv = Q.shape[2], K.shape[2]
    if Blocks is None:
        Sq, Sk = Q.shape[1], K.shape[1]
        k.grid(k.cdiv(Sk, BN), Hkv, Q.shape[0])
        kcol0 = k.let(k.program_id(0) * BN)
        hk, b = k.program_id(1), k.program_id(2)
        bq, q0, k0 = b, 0, 0
    else:
        k.grid(Blocks.shape[0], Hkv)
        hk, bq = k.program_id(1), 0
        b, q0, Sq, k0, Sk, kcol0 = _block_row(k, Blocks, Q, K, L, first="kcol0")
    group = k.let(H // Hkv)  # query heads a key / value head serves

    kt = k.shared(BN, D, K.dtype)
    vt = k.shared(BN, D, V.dtype)
    q = k.shared(BM, D, Q.dtype)
    do = k.shared(BM, D, dO.dtype)
    s = k.reg(BM, BN, f32)
    p = k.reg(BM, BN, Q.dtype)
    dp = k.reg(BM, BN, f32)
    ds = k.reg(BM, BN, f32)
    dsp = k.reg(BM, BN, Q.dtype)
    dk = k.reg(BN, D, f32)
    dv = k.reg(BN, D, f32)
    lse = k.vec(BM, f32)
    delta = k.vec(BM, f32)
    if dQacc is not None:
        dss = k.shared(BM, BN, Q.dtype)
        dq = k.reg(BM, D, f32)

    # a packed sequence's last block reads the next one's keys: its columns are masked (P = 0), and the
    # rows of dK and dV they make are not stored
    wait(load_async(kt, K[bq, :, hk, :], row=k0 + kcol0, col=0),
         load_async(vt, V[bq, :, hk, :], row=k0 + kcol0, col=0))
    zero(dk)
    zero(dv)
    first, stop = _q_blocks(k, kcol0, BM, BN, Sq, Sk, causal, left, right)
    if Blocks is not None:  # a block past its sequence's keys (the table's empty rows) visits no query block
        stop = first + k.max(stop - first, 0) * k.min(k.max(Sk - kcol0, 0), 1)
    for g in k.range(group):
        h = hk * group + g
        for i in k.pipeline(first, stop):
            qrow0 = i * BM
            # packed: the windows stop at the sequence's last query (zeros after it, not the next one's)
            Qc, dOc = (Q[b, :, h, :], dO[b, :, h, :]) if Blocks is None else (Q[0, :q0 + Sq, h, :],
                                                                              dO[0, :q0 + Sq, h, :])
            wait(load_async(q, Qc, row=q0 + qrow0, col=0),
                 load_async(do, dOc, row=q0 + qrow0, col=0))
            load(lse, L[b, h, :], row=qrow0)
            load(delta, Delta[bq, h, :], row=q0 + qrow0)
            mul(lse, lse, LOG2E)
            _probabilities(k, s, p, q, kt, lse, qrow0, kcol0, Sq, Sk, scale, causal, left, right)
            mma(dv, p, do, ta=True)
            _dscores(k, ds, dsp, dp, s, do, vt, delta, None if Blocks is None else (qrow0, Sq))
            if dQacc is None:
                mma(dk, dsp, q, ta=True)
            else:
                store(dss, dsp)
                mma(dq, dss, kt, accumulate=False)
                mma(dk, dsp, q, ta=True)  # dK's GEMM runs while dQ is scaled and added
                mul(dq, dq, scale)
                store_add(dQacc[bq, :, h, :], dq, row=q0 + qrow0, col=0)
    mul(dk, dk, scale)
    if Blocks is None:
        store(dK[b, :, hk, :], dk, row=kcol0, col=0)
        store(dV[b, :, hk, :], dv, row=kcol0, col=0)
    else:  # the sequence's own keys only: the rows after them are the next sequence's
        store(dK[0, :k0 + Sk, hk, :], dk, row=k0 + kcol0, col=0)
        store(dV[0, :k0 + Sk, hk, :], dv, row=k0 + kcol0, col=0)


@kernel(overlap=Pipelined(stages=2))
def attention_bwd_dkdv(k, Q, K, V, dO, L, Delta, dK, dV, scale, Blocks=None, *, causal, D, BM=64, BN=128, left=None,
                       right=None):
    """dK, dV for one key block of one KV head. Deterministic: no atomics (dQ comes from
    attention_bwd_dq). `left` / `right`: the forward's sliding window. Packed sequences (FlashAttention's
    varlen): with Blocks (n, 6) int32 (one row a key block of a sequence, _block_row), Q, K, V, dO, dK
    and dV are (1, total, heads, D) and Delta (1, H, total_q); L is the forward's (B, H, max_seqlen_q)."""
    _dkdv(k, Q, K, V, dO, L, Delta, dK, dV, scale, causal, D, BM, BN, left=left, right=right, Blocks=Blocks)


@kernel(overlap=Pipelined(stages=2))
def attention_bwd_fused(k, Q, K, V, dO, L, Delta, dK, dV, dQacc, scale, *, causal, D, BM=64, BN=128, left=None,
                        right=None):
    """dK and dV as attention_bwd_dkdv, and dQ in the same pass: each query block's dS K is added
    into dQacc (f32, zeroed by the caller) atomically, FlashAttention-2/3's scheme. Five GEMMs per
    block instead of the split backward's seven (dQ's kernel recomputes S and dP); dQacc's sums are
    not bitwise reproducible from run to run."""
    _dkdv(k, Q, K, V, dO, L, Delta, dK, dV, scale, causal, D, BM, BN, dQacc=dQacc, left=left, right=right)


@kernel(overlap=Pipelined(stages=2))
def attention_bwd_dq(k, Q, K, V, dO, L, Delta, dQ, scale, Blocks=None, *, causal, D, BM=64, BN=128, left=None,
                     right=None):
    """dQ for one query block: loops over the key blocks it can see, as the forward does (a sliding
    window's too). Packed sequences (FlashAttention's varlen), as the forward takes them: with Blocks
    (n, 6) int32, one row a block of BM query rows of a sequence (_block_row), Q, K, V, dO and dQ are
    (1, total, heads, D), Delta (1, H, total_q), and L the forward's (B, H, max_seqlen_q); a sequence's
    programs stream its own keys and store its own rows of dQ."""
    H, Hkv = Q.shape[2], K.shape[2]
    if Blocks is None:
        k.grid(k.cdiv(Q.shape[1], BM), H, Q.shape[0])
        qb, h, b = k.program_id(0), k.program_id(1), k.program_id(2)
        hk = k.let(h // (H // Hkv))
        qrow0 = k.let(qb * BM)
        bq, q0, Sq, k0, Sk = b, 0, Q.shape[1], 0, K.shape[1]
    else:
        k.grid(Blocks.shape[0], H)
        h, bq = k.program_id(1), 0
        hk = k.let(h // (H // Hkv))
        b, q0, Sq, k0, Sk, qrow0 = _block_row(k, Blocks, Q, K, L)

    q = k.shared(BM, D, Q.dtype)
    do = k.shared(BM, D, dO.dtype)
    kt = k.shared(BN, D, K.dtype)
    vt = k.shared(BN, D, V.dtype)
    s = k.reg(BM, BN, f32)
    p = k.reg(BM, BN, Q.dtype)
    dp = k.reg(BM, BN, f32)
    ds = k.reg(BM, BN, f32)
    dsp = k.reg(BM, BN, Q.dtype)
    dq = k.reg(BM, D, f32)
    lse = k.vec(BM, f32)
    delta = k.vec(BM, f32)

    # a packed sequence's last block reads the next one's rows of Q and dO: their rows of dQ are not stored
    wait(load_async(q, Q[bq, :, h, :], row=q0 + qrow0, col=0),
         load_async(do, dO[bq, :, h, :], row=q0 + qrow0, col=0))
    load(lse, L[b, h, :], row=qrow0)
    load(delta, Delta[bq, h, :], row=q0 + qrow0)
    mul(lse, lse, LOG2E)
    zero(dq)
    first = _first_kv_block(k, qrow0, BN, Sq, Sk, left)
    stop = _kv_blocks(k, qrow0, BM, BN, Sq, Sk, causal, right)
    if Blocks is not None:  # the table's empty rows (past every sequence's blocks) visit no key block
        stop = first + k.max(stop - first, 0) * k.min(k.max(Sq - qrow0, 0), 1)
    for j in k.pipeline(first, stop):
        Kc, Vc, row = _kv_windows(k, K, V, None, None, Blocks is not None, b, hk, k0, Sk, j, BN)
        wait(load_async(kt, Kc, row=row, col=0),
             load_async(vt, Vc, row=row, col=0))
        _probabilities(k, s, p, q, kt, lse, qrow0, j * BN, Sq, Sk, scale, causal, left, right)
        _dscores(k, ds, dsp, dp, s, do, vt, delta)
        mma(dq, dsp, kt)
    mul(dq, dq, scale)
    if Blocks is None:
        store(dQ[b, :, h, :], dq, row=qrow0, col=0)
    else:  # the sequence's own rows only
        store(dQ[0, :q0 + Sq, h, :], dq, row=q0 + qrow0, col=0)
