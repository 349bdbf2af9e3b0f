"""The public entry points: torch custom ops (autograd, torch.compile) over the kernel suite."""
from __future__ import annotations

import math
import os
import sys
from typing import Optional

import torch

from . import backends, validate
from .kernels import (attention_bwd_dkdv, attention_bwd_dq, attention_bwd_fused, attention_bwd_prep, attention_fwd,
                      gemm as gemm_k, gemm_fp8 as gemm_fp8_k,
                      gemm_fp8_rowwise as gemm_fp8_rowwise_k, layernorm as layernorm_k, rotary as rotary_k)


def _poison() -> bool:
    # Tests set this so an element a kernel forgets to write shows up as NaN, not as leftover memory.
    return os.environ.get("TILES_POISON", "0") == "1"


def _empty(shape, dtype, device):
    if _poison() and dtype.is_floating_point:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device)


def _direct(*tensors) -> bool:
    """Whether a call may run an op's implementation itself instead of going through torch's custom-op
    dispatch, whose first call in a process imports torch._dynamo (about 3 s). Only where the two cannot
    differ: plain tensors, nothing to differentiate, no torch.compile trace and no functorch transform
    running; there the custom op is what makes tiles compose."""
    if any(type(t) not in (torch.Tensor, torch.nn.Parameter) for t in tensors):
        return False
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return False
    if torch._C._are_functorch_transforms_active():
        return False
    return "torch._dynamo" not in sys.modules or not torch.compiler.is_compiling()


def _launch(backend: str, kfn, problem: dict, *args, **kwargs):
    b = backends.get(backend)
    kwargs.update(b.config(kfn.name, **problem))
    b.launch(kfn, *args, **kwargs)


# ----------------------------------------------------------------------------- attention

def _edges(left: int, right: int) -> dict:
    """A sliding window's edges (-1: none) as the attention kernels' constexprs left / right."""
    return {n: x for n, x in (("left", left), ("right", right)) if x >= 0}


ATTENTION_FWD = ("attention_fwd",)
ATTENTION_BWD = ("attention_bwd_prep", "attention_bwd_dkdv", "attention_bwd_dq")


def _attention_fwd_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float,
                        backend: str, cache_seqlens: Optional[torch.Tensor] = None,
                        block_table: Optional[torch.Tensor] = None, window_left: int = -1,
                        window_right: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
    for n, t in (("q", q), ("k", k), ("v", v)):
        validate.aligned(n, t)
    B, Sq, H, D = q.shape
    out = _empty(q.shape, q.dtype, q.device)
    lse = _empty((B, H, Sq), torch.float32, q.device)
    if out.numel() == 0:
        return out, lse
    if k.shape[1] == 0:  # no keys at all: every row is fully masked
        return out.zero_(), lse.fill_(float("inf"))
    # KLen: each sequence's key count; Pages: a paged cache's table (the key capacity its pages hold)
    extra = tuple(t for t in (cache_seqlens, block_table) if t is not None)
    keys = k.shape[1] * (1 if block_table is None else block_table.shape[1])
    # a sliding window's edges (-1: none), the kernel's constexprs left / right where there is one
    window = _edges(window_left, window_right)
    _launch(backend, attention_fwd, dict(D=D, causal=causal, Sq=Sq, Sk=keys),
            q, k, v, out, lse, scale, *extra, causal=causal, D=D, **window)
    return out, lse


_attention_fwd = torch.library.custom_op("tiles::attention_fwd", _attention_fwd_impl, mutates_args=())


@_attention_fwd.register_fake
def _(q, k, v, causal, scale, backend, cache_seqlens=None, block_table=None, window_left=-1, window_right=-1):
    B, Sq, H, D = q.shape
    return q.new_empty(q.shape), q.new_empty((B, H, Sq), dtype=torch.float32)  # contiguous, as the real op's


def _attention_bwd_impl(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                        lse: torch.Tensor, dlse: Optional[torch.Tensor], causal: bool, scale: float,
                        backend: str, window_left: int = -1,
                        window_right: int = -1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    B, Sq, H, D = q.shape
    dq = _empty(q.shape, q.dtype, q.device)
    dk = _empty(k.shape, k.dtype, k.device)
    dv = _empty(v.shape, v.dtype, v.device)
    if q.numel() == 0 or k.numel() == 0:
        return dq.zero_(), dk.zero_(), dv.zero_()
    do = do.to(q.dtype)
    if do.stride(-1) != 1 or do.data_ptr() % validate.ALIGN_BYTES:
        do = do.contiguous()
    delta = _empty((B, H, Sq), torch.float32, q.device)
    problem = dict(D=D, causal=causal, Sq=Sq, Sk=k.shape[1], B=B, Hkv=k.shape[2])
    window = _edges(window_left, window_right)  # the forward's edges
    _launch(backend, attention_bwd_prep, problem, out, do, delta, D=D)
    if dlse is not None:
        # d lse / d scores = P, so a gradient on the LSE joins softmax's row term: dS = P ∘ (dP − (Δ − dlse)).
        delta -= dlse.to(torch.float32)
    if backends.get(backend).supports("attention_bwd_fused", **problem):
        # dQ in the dK/dV pass, added up in f32 across key blocks (5 GEMMs a block instead of 7)
        dq_acc = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
        _launch(backend, attention_bwd_fused, problem, q, k, v, do, lse, delta, dk, dv, dq_acc, scale,
                causal=causal, D=D, **window)
        return dq.copy_(dq_acc), dk, dv
    _launch(backend, attention_bwd_dkdv, problem, q, k, v, do, lse, delta, dk, dv, scale, causal=causal, D=D, **window)
    _launch(backend, attention_bwd_dq, problem, q, k, v, do, lse, delta, dq, scale, causal=causal, D=D, **window)
    return dq, dk, dv


_attention_bwd = torch.library.custom_op("tiles::attention_bwd", _attention_bwd_impl, mutates_args=())


@_attention_bwd.register_fake
def _(do, q, k, v, out, lse, dlse, causal, scale, backend, window_left=-1, window_right=-1):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _attn_setup(ctx, inputs, output):
    q, k, v, causal, scale, backend, cache_seqlens, _, window_left, window_right = inputs  # a table comes with counts
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.set_materialize_grads(False)  # an unused LSE's gradient stays None: Delta is not rewritten by zeros
    ctx.causal, ctx.scale, ctx.backend = causal, scale, backend
    ctx.ragged = cache_seqlens is not None  # tiles.attention refuses it with grads; the op itself is public
    ctx.window = (window_left, window_right)


def _attn_backward(ctx, dout, dlse):
    if ctx.ragged:  # the backward kernels run over every key of the cache: refuse rather than be wrong
        raise ValueError("tiles::attention_fwd with cache_seqlens is forward only: its backward would run over every "
                         "row of the cache; slice each sequence's keys and call it without cache_seqlens for gradients")
    q, k, v, out, lse = ctx.saved_tensors
    if dout is None:  # only the LSE was used
        dout = torch.zeros_like(out)
    # backward(create_graph=True) runs this with grad enabled: the gradients are still computed, but
    # marked so that differentiating them again raises (the kernels have no second-order formula)
    second = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (dout, dlse, q, k, v))
    with torch.no_grad():
        # eager autograd runs the implementation itself: the custom op's dispatch costs host time a
        # training step pays once per attention layer (the op stays for torch.compile and functorch)
        tensors = (dout, q, k, v, out, lse) + (() if dlse is None else (dlse,))
        bwd = _attention_bwd_impl if _direct(*tensors) else _attention_bwd
        dq, dk, dv = bwd(dout, q, k, v, out, lse, dlse, ctx.causal, ctx.scale, ctx.backend, *ctx.window)
    if second:
        dq, dk, dv = _first_order("tiles.attention", dq, dk, dv)
    return dq, dk, dv, None, None, None, None, None, None, None


def _first_order(op: str, *grads):
    """Gradients that raise a clear error when differentiated again (torch's once_differentiable)."""
    err = torch._C._functions.DelayedError(
        f"{op} has first-order gradients only: its backward kernels have no derivative of their own, so "
        f"a gradient of its gradient (backward(create_graph=True), then backward again) is not supported".encode(),
        len(grads))
    # the error node needs inputs that require grad to attach itself (as once_differentiable does)
    return err(*[g.detach().requires_grad_() for g in grads])


_attention_fwd.register_autograd(_attn_backward, setup_context=_attn_setup)


def attention(q, k, v, causal: bool = False, scale: Optional[float] = None, backend: Optional[str] = None,
              return_lse: bool = False, cache_seqlens=None, block_table=None, window_size=(-1, -1), sinks=None):
    """Scaled dot-product attention, FlashAttention's layout.

    q: (batch, seq_q, heads, head_dim); k, v: (batch, seq_k, kv_heads, head_dim), kv_heads dividing
    heads (MHA, GQA, MQA); head_dim 64 or 128; bf16 or fp16. Tensors in SDPA's (batch, heads, seq,
    head_dim) layout are passed as their views x.transpose(1, 2) and read where they lie: any strides
    with a contiguous head_dim. `causal` aligns the mask bottom-right
    (as FlashAttention does when seq_q != seq_k); rows that see no key give zeros. Returns the output
    in q's dtype, and with `return_lse` also the log-sum-exp (batch, heads, seq_q) in f32 (+inf on
    rows with no key). Differentiable in q, k and v, through the output and the LSE; the gradients are
    first order (differentiating them again raises). `scale` defaults to 1/sqrt(head_dim); the kernels
    apply it to the scores in f32.

    Decode: one query row runs unmasked, since it sees every key either way. Under GQA / MQA, with up to
    64 query rows a sequence (decode, speculative decoding), the query heads of a key / value head run as
    the rows of one head, which reads the cache once for all of them; causal (from 1024 keys seen by every
    row), those keys run so and the last seq_q - 1 keys in a second call, merged by the log-sum-exp.

    `cache_seqlens`: a KV cache of ragged lengths, (batch,) int32 or int64 on q's device (or the CPU).
    Sequence b then attends the first cache_seqlens[b] of its seq_k keys (k and v are the cache, allocated
    for the longest), and causal aligns its rows bottom-right to those keys; a sequence of 0 keys gives
    zeros (LSE +inf). Each program reads its count on the device, so one CUDA graph serves every step of
    a decode loop whose counts change in place. The counts must lie in [0, seq_k]: checked on the host
    except under CUDA graph capture or torch.compile, where a count outside is clamped to that range.
    Counts on the device cost that check one synchronization; counts on the CPU are checked there and
    copied through pinned memory, with none. Forward only: with cache_seqlens, q, k and v may not
    require grad. Without it, every sequence has seq_k keys, and a cache sliced to its length
    (k_cache[:, :L]) is read in place. The cache's rows past a count are never read into the arithmetic
    (they may hold anything, NaN included).

    `block_table`: a paged cache (vLLM's layout), with cache_seqlens. k and v are then a pool of pages,
    (pages, page_size, kv_heads, head_dim), page_size a multiple of 256, and block_table (batch, pages a
    sequence) int32 or int64 names the pool's pages that hold each sequence's keys in order: keys
    [j · page_size, (j + 1) · page_size) of sequence b are in page block_table[b, j]. The entries a
    count reaches must name pages of the pool (checked as the counts are; clamped into it where not).

    `window_size`: a sliding window, FlashAttention's (left, right), -1 for no edge on a side. Row i sees
    key j where i + seq_k - seq_q - left <= j <= i + seq_k - seq_q + right (each sequence's own seq_k
    with cache_seqlens); causal fixes right at 0. Only the key blocks inside a query block's window are
    visited, so a window of w keys costs about w keys a row whatever seq_k is; the backward too.

    `sinks`: attention sinks (gpt-oss), one logit a query head, (heads,) float: each row's softmax takes
    one more term, exp(sinks[h]), with a value of zero, so a row may give weight to no key. Out and the
    LSE are the kernels' rescaled by it (an elementwise pass in f32), and the sinks are differentiable. A
    row that sees no key then gives zeros and LSE = sinks[h].
    """
    paged = block_table is not None
    q, k, v, scale, device = validate.attention(q, k, v, causal, scale, backend, paged=paged)
    validate.flag("return_lse", return_lse)
    if sinks is not None:
        sinks = validate.sinks(sinks, q.shape[2], device)
    left, right = validate.window_size(window_size, causal)
    B, Sq, H, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    lens = pages = None
    keys = Sk  # the keys a sequence's cache holds (a paged cache's: its pages' keys)
    if paged and cache_seqlens is None:
        raise ValueError("block_table takes cache_seqlens with it: each sequence's key count in its pages")
    if cache_seqlens is not None:
        if paged:
            pages = validate.block_table(block_table, B, k.shape[0], Sk, device)
            keys = Sk * pages.shape[1]
        lens = validate.cache_seqlens(cache_seqlens, B, keys, device)
        if paged:
            pages = validate.to_device(validate.block_table_entries(pages, lens, k.shape[0], Sk, device), device)
        lens = validate.to_device(lens, device)
        if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
            raise ValueError("attention with cache_seqlens is forward only (decode, prefill into a cache): q, k and v "
                             "may not require grad; call it under torch.no_grad(), or slice each sequence's keys "
                             "and call it without cache_seqlens for gradients")
    needs = ATTENTION_FWD + (ATTENTION_BWD if any(t.requires_grad for t in (q, k, v)) else ())
    b = backends.resolve(backend, device, needs)
    for n, t in (("q", q), ("k", k), ("v", v)):
        validate.index_range(n, t, b.max_index)
    left, right = validate.void_edges(left, right, keys, Sq)
    if Sq == 1:  # decode: aligned bottom-right, the one query row sees every key, so the mask is void
        causal, right = False, None  # (and a right edge past the last key; a left edge stays)
        if left is not None and lens is None:  # the window is the last left + 1 keys: a slice, and no mask
            k, v, left = k[:, Sk - 1 - left:], v[:, Sk - 1 - left:], None
            Sk = k.shape[1]
    window = (-1 if left is None else left, -1 if right is None else right)
    if _groups(Sq, Sk, H, Hkv, causal, lens is not None, window != (-1, -1)):
        out, lse = _grouped(q, k, v, causal, scale, b.name, lens, pages)
    else:
        out, lse = _fwd(q, k, v, causal, scale, b.name, lens, pages, window)
    if sinks is not None:
        out, lse = _sink(out, lse, sinks)
    return (out, lse) if return_lse else out


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int, max_seqlen_k: int, causal: bool = False,
                     scale: Optional[float] = None, backend: Optional[str] = None, return_lse: bool = False,
                     window_size=(-1, -1), block_table=None, sinks=None):
    """Attention over packed sequences of different lengths, FlashAttention's varlen call.

    q: (total_q, heads, head_dim); k, v: (total_k, kv_heads, head_dim): a batch's sequences laid end to
    end, with no padding. cu_seqlens_q, cu_seqlens_k: (batch + 1,) int32 or int64 offsets on q's device
    (or the CPU), from 0 to total_q / total_k: sequence b's queries are rows cu_seqlens_q[b] ..
    cu_seqlens_q[b + 1] of q, and it attends its keys, rows cu_seqlens_k[b] .. cu_seqlens_k[b + 1] of k
    and v, and no other sequence's. max_seqlen_q, max_seqlen_k: ints, at least the longest sequence's
    lengths (the grid is sized by max_seqlen_q). Every sequence follows tiles.attention's rules with its
    own lengths: `causal` aligns its mask bottom-right, `window_size` slides over its own keys, a row
    that sees no key gives zeros (LSE +inf), and dtypes, head dims, GQA / MQA, strides and `scale` are
    as there. Returns out (total_q, heads, head_dim) in q's dtype, and with `return_lse` also the
    log-sum-exp (heads, total_q) f32, FlashAttention's packed layout.

    The offsets are checked on the host (a synchronization for offsets on the device, none for offsets on
    the CPU, which go over through pinned memory), except under CUDA graph capture or torch.compile,
    where each program clamps its sequence into the packed rows and to max_seqlen_q (no access outside
    the tensors; rows of out and of the gradients that no valid offset covers are then left unwritten).

    Differentiable in q, k and v, through the output and the LSE (first order, as tiles.attention). The
    backward runs the split kernels, dK / dV over a table of the sequences' key blocks (built on the
    device from the offsets, no synchronization), then dQ over the query blocks as the forward's grid;
    it is deterministic, and each sequence's gradients are those of tiles.attention's split backward on
    it alone (to the bit, where tiles.attention takes that backward: not Hopper's fused one).

    `block_table`: the keys in a paged cache (vLLM's layout, FlashAttention's varlen call with a block
    table: chunked prefill, a prefix cache). k and v are then a pool of pages (pages, page_size,
    kv_heads, head_dim), page_size a multiple of 256, block_table (batch, pages a sequence) int32 or
    int64 names each sequence's pages in order, and cu_seqlens_k holds the running sums of the
    sequences' key counts (from 0): sequence b attends the first cu_seqlens_k[b + 1] - cu_seqlens_k[b]
    keys of its pages, and causal aligns its queries to the last of them (a chunk's queries after the
    keys cached before it). max_seqlen_k is at most the keys a row of the table holds. The entries the
    counts reach must name pages of the pool (checked on the host, as the offsets are). Forward only.

    `sinks`: attention sinks (gpt-oss), one logit a query head, (heads,) float, as in tiles.attention:
    each row's softmax takes one more term, exp(sinks[h]), with a value of zero (differentiable, the
    sinks too); a row that sees no key gives zeros and LSE = sinks[h].
    """
    q, k, v = validate.as_tensor("q", q), validate.as_tensor("k", k), validate.as_tensor("v", v)
    paged = block_table is not None
    validate.rank("q", q, 3, "(total, heads, head_dim): packed sequences")
    for n, t in (("k", k), ("v", v)):
        if paged:
            validate.rank(n, t, 4, "(pages, page_size, kv_heads, head_dim): a pool of pages, with block_table")
        else:
            validate.rank(n, t, 3, "(total, heads, head_dim): packed sequences")
    k4, v4 = (k, v) if paged else (k[None], v[None])
    q4, k4, v4, scale, device = validate.attention(q[None], k4, v4, causal, scale, backend, paged=paged)
    validate.flag("return_lse", return_lse)
    if sinks is not None:
        sinks = validate.sinks(sinks, q.shape[1], device)
    left, right = validate.window_size(window_size, causal)
    cu_q = validate.cu_seqlens("cu_seqlens_q", cu_seqlens_q, q.shape[0], max_seqlen_q, "max_seqlen_q", device)
    B = cu_q.shape[0] - 1
    cu_k = validate.cu_seqlens("cu_seqlens_k", cu_seqlens_k, None if paged else k.shape[0], max_seqlen_k,
                               "max_seqlen_k", device, batch=B)
    grads = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    if paged:
        if grads:
            raise ValueError("attention_varlen with block_table is forward only (prefill into a paged cache): q, k and "
                             "v may not require grad; call it under torch.no_grad()")
        pages = validate.block_table(block_table, B, k.shape[0], k.shape[1], device)
        if max_seqlen_k > pages.shape[1] * k.shape[1]:
            raise ValueError(f"max_seqlen_k is {max_seqlen_k}, but a row of block_table holds {pages.shape[1]} pages of "
                             f"{k.shape[1]} keys ({pages.shape[1] * k.shape[1]})")
        lens = (cu_k[1:] - cu_k[:-1]).to(torch.int32)  # each sequence's key count, checked with the offsets
        pages = validate.block_table_entries(pages, lens, k.shape[0], k.shape[1], device)
    b = backends.resolve(backend, device, ATTENTION_FWD + (ATTENTION_BWD if grads else ()))
    for n, t in (("q", q4), ("k", k4), ("v", v4)):
        validate.index_range(n, t, b.max_index)
    left, right = validate.void_edges(left, right, max_seqlen_k, max_seqlen_q)
    window = (-1 if left is None else left, -1 if right is None else right)
    # the offsets stay where the host read them: the kernels' tables of blocks are built there
    if paged:
        pages = validate.to_device(pages, device)
        fwd = _attention_varlen_paged_fwd_impl if _direct(q4, k4, v4, cu_q, lens, pages) else _attention_varlen_paged_fwd
        out, lse = fwd(q4, k4, v4, cu_q, lens, pages, max_seqlen_q, causal, scale, b.name, *window)
    else:
        fwd = _attention_varlen_fwd_impl if _direct(q4, k4, v4, cu_q, cu_k) else _attention_varlen_fwd
        out, lse = fwd(q4, k4, v4, cu_q, cu_k, max_seqlen_q, causal, scale, b.name, *window)
    out = out[0]
    if not return_lse and sinks is None:
        return out
    lse = _packed_lse(lse, validate.to_device(cu_q, device), q.shape[0])
    if sinks is not None:  # (tiles.attention's rescale, on the packed rows as a batch of one)
        out, lse = (x[0] for x in _sink(out[None], lse[None], sinks))
    return (out, lse) if return_lse else out


def _packed_lse(lse: torch.Tensor, cu: torch.Tensor, total: int) -> torch.Tensor:
    """The kernels' LSE (batch, heads, max_seqlen_q) as FlashAttention's packed (heads, total_q): row r of
    the packed sequences is row r - cu[b] of sequence b, where cu[b] <= r < cu[b + 1]. Torch operations
    on the device, with no synchronization."""
    rows = torch.arange(total, device=lse.device, dtype=torch.int32)
    seq = torch.searchsorted(cu[1:], rows, right=True).clamp_max(lse.shape[0] - 1)
    return lse[seq, :, (rows - cu[seq]).clamp(0, max(lse.shape[2] - 1, 0))].t().contiguous()


def _packed_forward(q, k, v, cu_q, cu_k, max_seqlen_q, keys, causal, scale, backend, window_left, window_right,
                    pages=None):
    """The forward over packed queries (q (1, total_q, heads, head_dim)): out as q and the LSE (batch, heads,
    max_seqlen_q), its rows past a sequence's length unwritten. cu_k: the keys' offsets (packed keys), or
    with `pages` (a paged cache) the running sums of the sequences' key counts; `keys` the most a
    sequence has."""
    for n, t in (("q", q), ("k", k), ("v", v)):
        validate.aligned(n, t)
    B, H, D = cu_q.shape[0] - 1, q.shape[2], q.shape[3]
    out = _empty(q.shape, q.dtype, q.device)
    lse = _empty((B, H, max_seqlen_q), torch.float32, q.device)
    if out.numel() == 0 or lse.numel() == 0:
        return out, lse
    if keys == 0:  # no keys at all: every row is fully masked
        return out.zero_(), lse.fill_(float("inf"))
    problem = dict(D=D, causal=causal, Sq=max_seqlen_q, Sk=keys)
    blocks = _table(cu_q, cu_k, _tile(backend, attention_fwd, "BM", problem), q.shape[1], causal, q.device)
    _launch(backend, attention_fwd, problem, q, k, v, out, lse, scale, None, pages, blocks, causal=causal, D=D,
            **_edges(window_left, window_right))
    return out, lse


def _attention_varlen_fwd_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_q: torch.Tensor,
                               cu_k: torch.Tensor, max_seqlen_q: int, causal: bool, scale: float, backend: str,
                               window_left: int = -1, window_right: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
    """q, k, v (1, total, heads, head_dim): out (1, total_q, heads, head_dim) and the LSE (batch, heads,
    max_seqlen_q), its rows past a sequence's length unwritten."""
    return _packed_forward(q, k, v, cu_q, cu_k, max_seqlen_q, k.shape[1], causal, scale, backend, window_left,
                           window_right)


_attention_varlen_fwd = torch.library.custom_op("tiles::attention_varlen_fwd", _attention_varlen_fwd_impl,
                                                mutates_args=())


@_attention_varlen_fwd.register_fake
def _(q, k, v, cu_q, cu_k, max_seqlen_q, causal, scale, backend, window_left=-1, window_right=-1):
    return q.new_empty(q.shape), q.new_empty((cu_q.shape[0] - 1, q.shape[2], max_seqlen_q), dtype=torch.float32)


def _attention_varlen_paged_fwd_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_q: torch.Tensor,
                                     lens: torch.Tensor, pages: torch.Tensor, max_seqlen_q: int, causal: bool,
                                     scale: float, backend: str, window_left: int = -1,
                                     window_right: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
    """q (1, total_q, heads, head_dim) packed; k, v a pool of pages (pages, page size, kv_heads, head_dim),
    lens (B,) each sequence's key count in its pages, pages (B, pages a sequence) the table: out as q,
    and the LSE (batch, heads, max_seqlen_q), its rows past a sequence's length unwritten."""
    cu_k = torch.cat([lens.new_zeros(1), lens.cumsum(0, dtype=torch.int32)])
    return _packed_forward(q, k, v, cu_q, cu_k, max_seqlen_q, k.shape[1] * pages.shape[1], causal, scale, backend,
                           window_left, window_right, pages)


_attention_varlen_paged_fwd = torch.library.custom_op("tiles::attention_varlen_paged_fwd",
                                                      _attention_varlen_paged_fwd_impl, mutates_args=())


@_attention_varlen_paged_fwd.register_fake
def _(q, k, v, cu_q, lens, pages, max_seqlen_q, causal, scale, backend, window_left=-1, window_right=-1):
    return q.new_empty(q.shape), q.new_empty((cu_q.shape[0] - 1, q.shape[2], max_seqlen_q), dtype=torch.float32)


def _tile(backend: str, kfn, name: str, problem: dict) -> int:
    """The tile size `name` (BM, BN) a backend launches kernel kfn with: its config's, or the kernel's own."""
    return int(backends.get(backend).config(kfn.name, **problem).get(name, kfn.signature.parameters[name].default))


def _table(cu_q: torch.Tensor, cu_k: torch.Tensor, size: int, total: int, causal: bool, device,
           keys: bool = False) -> torch.Tensor:
    """_blocks built where the offsets are (the host, wherever it read them: a few dozen small torch
    operations there cost the device nothing, where on the device they took about 140 us an H100 call,
    session 47), then on `device`."""
    return validate.to_device(_blocks(cu_q, cu_k, size, total, causal, keys), device)


def _blocks(cu_q: torch.Tensor, cu_k: torch.Tensor, size: int, total: int, causal: bool,
            keys: bool = False) -> torch.Tensor:
    """Packed sequences' programs (kernels/attention.py, _block_row): one row a block of `size` query rows
    of a sequence (the forward, dQ), or with `keys` of `size` keys (dK / dV): (sequence, its first query
    row, its query count, its first key, its key count, the block's first row or key within it). Then
    rows with no queries or keys (a program that stores nothing) up to the most blocks any offsets of
    `total` rows (keys) can have, which sizes the grid with no read of the device's offsets. The blocks
    come heaviest first (the key blocks a query block visits, or the query rows that see a key block;
    causal masks count), so that the last programs a walk of the grid runs are its lightest (every
    backend runs a grid's programs in order). Torch operations where the offsets are, no synchronization."""
    B = cu_q.shape[0] - 1
    rows = max((total + B * (size - 1)) // size, 1)
    cq, ck = cu_q.long(), cu_k.long()
    lq, lk = cq[1:] - cq[:-1], ck[1:] - ck[:-1]
    blocks = ((lk if keys else lq) + size - 1).div(size, rounding_mode="floor")
    ends = blocks.cumsum(0)
    p = torch.arange(rows, device=cu_q.device)
    seq = torch.searchsorted(ends, p, right=True)
    live = seq < B
    s = seq.clamp_max(B - 1)
    zero = torch.zeros_like(p)
    sq, sk = torch.where(live, lq[s], zero), torch.where(live, lk[s], zero)
    at = torch.where(live, (p - (ends[s] - blocks[s])) * size, zero)
    if keys:  # the query rows that see the block: bottom-right, row r sees keys up to r + seq_k - seq_q
        work = sq - (at - (sk - sq)).clamp(min=0).minimum(sq) if causal else sq
    else:  # the keys its last row sees
        work = ((at + size).minimum(sq) + sk - sq).clamp(min=0).minimum(sk) if causal else sk
    work = torch.where(live & (sq > 0) & (sk > 0), work, torch.full_like(work, -1))
    table = torch.stack([s, cq[s], sq, ck[s], sk, at], 1)
    return table[torch.sort(work, descending=True, stable=True).indices].to(torch.int32).contiguous()


def _attention_varlen_bwd_impl(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                               out: torch.Tensor, lse: torch.Tensor, dlse: Optional[torch.Tensor],
                               cu_q: torch.Tensor, cu_k: torch.Tensor, causal: bool, scale: float, backend: str,
                               window_left: int = -1,
                               window_right: int = -1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of _attention_varlen_fwd: q, k, v, out, do (1, total, heads, head_dim), lse and dlse
    the forward's (batch, heads, max_seqlen_q). Delta is one value a packed row, (1, heads, total_q)."""
    dq = _empty(q.shape, q.dtype, q.device)
    dk = _empty(k.shape, k.dtype, k.device)
    dv = _empty(v.shape, v.dtype, v.device)
    if q.numel() == 0 or k.numel() == 0 or lse.numel() == 0:
        return dq.zero_(), dk.zero_(), dv.zero_()
    do = do.to(q.dtype)
    if do.stride(-1) != 1 or do.data_ptr() % validate.ALIGN_BYTES:
        do = do.contiguous()
    B, H, longest = lse.shape
    D, total_q = q.shape[3], q.shape[1]
    delta = _empty((1, H, total_q), torch.float32, q.device)
    problem = dict(D=D, causal=causal, Sq=longest, Sk=k.shape[1], B=B, Hkv=k.shape[2])
    window = _edges(window_left, window_right)
    _launch(backend, attention_bwd_prep, problem, out, do, delta, D=D)
    if dlse is not None:  # as in _attention_bwd_impl, with the LSE's gradient taken to the packed rows
        delta[0] -= _packed_lse(dlse.to(torch.float32), validate.to_device(cu_q, q.device), total_q)
    blocks = _table(cu_q, cu_k, _tile(backend, attention_bwd_dkdv, "BN", problem), k.shape[1], causal, q.device,
                    keys=True)
    _launch(backend, attention_bwd_dkdv, problem, q, k, v, do, lse, delta, dk, dv, scale, blocks, causal=causal, D=D,
            **window)
    blocks = _table(cu_q, cu_k, _tile(backend, attention_bwd_dq, "BM", problem), total_q, causal, q.device)
    _launch(backend, attention_bwd_dq, problem, q, k, v, do, lse, delta, dq, scale, blocks, causal=causal, D=D,
            **window)
    return dq, dk, dv


_attention_varlen_bwd = torch.library.custom_op("tiles::attention_varlen_bwd", _attention_varlen_bwd_impl,
                                                mutates_args=())


@_attention_varlen_bwd.register_fake
def _(do, q, k, v, out, lse, dlse, cu_q, cu_k, causal, scale, backend, window_left=-1, window_right=-1):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _varlen_setup(ctx, inputs, output):
    q, k, v, cu_q, cu_k, _, causal, scale, backend, window_left, window_right = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k)
    ctx.set_materialize_grads(False)  # an unused LSE's gradient stays None: no zeros gathered and subtracted
    ctx.causal, ctx.scale, ctx.backend, ctx.window = causal, scale, backend, (window_left, window_right)


def _varlen_backward(ctx, dout, dlse):
    q, k, v, out, lse, cu_q, cu_k = ctx.saved_tensors
    if dout is None:  # only the LSE was used
        dout = torch.zeros_like(out)
    second = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (dout, dlse, q, k, v))
    with torch.no_grad():
        tensors = (dout, q, k, v, out, lse, cu_q, cu_k) + (() if dlse is None else (dlse,))
        bwd = _attention_varlen_bwd_impl if _direct(*tensors) else _attention_varlen_bwd
        dq, dk, dv = bwd(dout, q, k, v, out, lse, dlse, cu_q, cu_k, ctx.causal, ctx.scale, ctx.backend, *ctx.window)
    if second:
        dq, dk, dv = _first_order("tiles.attention_varlen", dq, dk, dv)
    return dq, dk, dv, None, None, None, None, None, None, None, None


_attention_varlen_fwd.register_autograd(_varlen_backward, setup_context=_varlen_setup)


def _sink(out, lse, sinks):
    """The softmax with one more term a row, exp(sinks[h]) with a value of zero (attention sinks): lse' =
    log(e^lse + e^sink) and out' = out · e^(lse - lse'), in f32; a row that saw no key (lse +inf, the
    kernels' convention) keeps its zeros and takes lse' = sink. Torch operations, so autograd reaches the
    sinks, and out and lse reach the kernels' backward (which takes a gradient on the LSE)."""
    seen = torch.where(lse == float("inf"), -float("inf"), lse)
    total = torch.logaddexp(seen, sinks.float()[None, :, None])
    w = torch.exp(seen - total).transpose(1, 2).unsqueeze(-1)  # (B, Sq, H, 1)
    return (out.float() * w).to(out.dtype), total


# Up to this many query rows a sequence (decode, speculative decoding, a short chunk), GQA / MQA runs the
# query heads of a key / value head as the rows of one head. Below a row tile, each query head would
# fill a tile of its own mostly with padding and read the same keys again; grouped, a kv head's keys are
# read once for the group, and the grid has H / Hkv times fewer programs to cut along the keys. From a
# tile of rows up the two read the keys the same number of times.
GROUPED_ROWS = 64
# Causal, the grouped call covers the keys every row sees, and the last Sq - 1 keys take a second call
# and a merge (about ten small launches): worth it only from this many keys seen by all (an estimate,
# not yet measured; `bench/attention_decode.py` times both ways).
GROUPED_CAUSAL_KEYS = 1024


def _groups(Sq: int, Sk: int, H: int, Hkv: int, causal: bool, ragged: bool = False, windowed: bool = False) -> bool:
    if Hkv == H or Sq > GROUPED_ROWS or Sk == 0:
        return False
    if windowed:  # a window's left edge is at each row's own position, and grouped rows stand at G positions
        return False
    if causal and ragged:  # the keys every row sees end at each sequence's own count: no one slice holds them
        return False
    return not causal or Sk - Sq + 1 >= max(GROUPED_CAUSAL_KEYS, 1)  # the grouped call has a key for every row


def _fwd(q, k, v, causal, scale, backend, lens=None, pages=None, window=(-1, -1)):
    tensors = (q, k, v) + tuple(t for t in (lens, pages) if t is not None)
    fwd = _attention_fwd_impl if _direct(*tensors) else _attention_fwd
    return fwd(q, k, v, causal, scale, backend, lens, pages, *window)


def _grouped(q, k, v, causal, scale, backend, lens=None, pages=None):
    """The forward with GQA's query heads as rows: (out, lse) as the call on q as given would return them.

    Causal, row s (of Sq) sees keys up to Sk - Sq + s: the first Sk - Sq + 1 keys are seen by every row, so
    they take one grouped call without a mask. The last Sq - 1 keys take a causal call on the rows as given
    (bottom-right over those keys, row s sees the first s of them: the same mask), and the two merge by
    their log-sum-exp, as the kernels merge the parts of a split key range. With `lens` (each sequence's
    key count; not causal) the grouped rows of a sequence share its count, as its query heads do, and
    with `pages` its paged cache's table."""
    B, Sq, H, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    seen = Sk - Sq + 1 if causal else Sk
    out, lse = _fwd(_grouped_rows(q, Hkv), k[:, :seen], v[:, :seen], False, scale, backend, lens, pages)
    out, lse = _ungrouped(out, lse, Sq, H)
    if seen < Sk:
        out, lse = _merge(out, lse, *_fwd(q, k[:, seen:], v[:, seen:], True, scale, backend))
    return out, lse


def _grouped_rows(q: torch.Tensor, Hkv: int) -> torch.Tensor:
    """q (B, Sq, H, D) as (B, Sq · H / Hkv, Hkv, D): the query heads that share a key / value head become
    rows of one head, row s · H / Hkv + j being query head hk · H / Hkv + j at row s (FlashAttention-2
    swaps seqlen_q and the group the same way at decode). One row a sequence is a view of q; more rows
    are a copy, small beside the keys they save reading."""
    B, Sq, H, D = q.shape
    return q.unflatten(2, (Hkv, H // Hkv)).transpose(2, 3).reshape(B, Sq * (H // Hkv), Hkv, D)


def _ungrouped(out: torch.Tensor, lse: torch.Tensor, Sq: int, H: int):
    """The grouped call's out (B, Sq · G, Hkv, D) and lse (B, Hkv, Sq · G) back in q's heads: (B, Sq, H, D),
    (B, H, Sq)."""
    B, _, Hkv, D = out.shape
    G = H // Hkv
    out = out.unflatten(1, (Sq, G)).transpose(2, 3).reshape(B, Sq, H, D)
    lse = lse.unflatten(2, (Sq, G)).transpose(2, 3).reshape(B, H, Sq)
    return out, lse


def _merge(o1, l1, o2, l2):
    """One attention from two over disjoint keys, every row having seen a key in the first: l = log(e^l1 +
    e^l2), out = o1 · e^(l1 - l) + o2 · e^(l2 - l), in f32. A row that saw no key in the second (its LSE +inf,
    the kernels' convention, and its output zero) keeps the first's output exactly. The parts arrive
    rounded to q's dtype, so a merged row carries one rounding more than a single call's (the kernels'
    own merges of a split key range sum f32 parts)."""
    l2 = torch.where(l2 == float("inf"), -float("inf"), l2)
    lse = torch.logaddexp(l1, l2)
    w = torch.exp(l1 - lse).transpose(1, 2).unsqueeze(-1)  # (B, Sq, H, 1), the first part's weight
    return torch.lerp(o2.float(), o1.float(), w).to(o1.dtype), lse


# ----------------------------------------------------------------------------- gemm


def _gemm_impl(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype, backend: str) -> torch.Tensor:
    validate.aligned("a", a)
    validate.aligned("b", b)
    M, K = a.shape
    N = b.shape[1]
    c = _empty_row_aligned(M, N, out_dtype, a.device)
    if c.numel() == 0:
        return c
    if K == 0:
        return c.zero_()
    m = backends.get(backend).gemm_multiple
    if K % m or N % m:  # a lowering that reads whole vectors along K and N: zero-pad to them
        Kp, Np = -(-K // m) * m, -(-N // m) * m
        ap = torch.zeros((M, Kp), dtype=a.dtype, device=a.device)
        ap[:, :K] = a
        bp = torch.zeros((Kp, Np), dtype=b.dtype, device=b.device)
        bp[:K, :N] = b
        cp = _empty((M, Np), out_dtype, a.device)
        _launch(backend, gemm_k, dict(M=M, N=Np, K=Kp), ap, bp, cp)
        return cp[:, :N]
    _launch(backend, gemm_k, dict(M=M, N=N, K=K), a, b, c)
    return c


_gemm = torch.library.custom_op("tiles::gemm", _gemm_impl, mutates_args=())


@_gemm.register_fake
def _(a, b, out_dtype, backend):
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype)


def _gemm_setup(ctx, inputs, output):
    a, b, out_dtype, backend = inputs
    ctx.save_for_backward(a, b)
    ctx.backend = backend


def _gemm_backward(ctx, dc):
    a, b = ctx.saved_tensors
    dc = dc.to(a.dtype).contiguous()
    da = _gemm(_row_aligned(dc), _row_aligned(b.t().contiguous()), a.dtype, ctx.backend)
    db = _gemm(_row_aligned(a.t().contiguous()), _row_aligned(dc), b.dtype, ctx.backend)
    return da, db, None, None


_gemm.register_autograd(_gemm_backward, setup_context=_gemm_setup)


def _empty_row_aligned(M: int, N: int, dtype, device) -> torch.Tensor:
    """An (M, N) output whose rows start on 16-byte boundaries: allocated padded, nothing copied."""
    esz = torch.empty((), dtype=dtype).element_size()
    cols = -(-N * esz // validate.ALIGN_BYTES) * validate.ALIGN_BYTES // esz
    return _empty((M, cols), dtype, device)[:, :N]


def _row_aligned(t: torch.Tensor) -> torch.Tensor:
    """t itself, or a copy whose rows start on 16-byte boundaries (odd K or N): the copy engines of
    both vendors address rows by 16-byte-aligned strides."""
    if validate.stride_aligned(t):
        return t
    cols = -(-t.shape[1] * t.element_size() // validate.ALIGN_BYTES) * validate.ALIGN_BYTES // t.element_size()
    # zeros, not empty: the copy engines may read the padding of a row (never into the result), and an
    # initialized read keeps compute-sanitizer's initcheck quiet.
    padded = torch.zeros((t.shape[0], cols), dtype=t.dtype, device=t.device)
    padded[:, : t.shape[1]] = t
    return padded[:, : t.shape[1]]


def gemm(a, b, out_dtype: Optional[torch.dtype] = None, backend: Optional[str] = None):
    """C = a @ b for a (M, K) and b (K, N), bf16 or fp16, accumulated in f32; C in `out_dtype`
    (default a's dtype; bf16, fp16 or f32). a may have leading dimensions (..., M, K), as activations
    (batch, sequence, hidden) do: they are rows of one GEMM, and C is (..., M, N). Any M, N, K, and
    any strides: an operand a backend cannot read where it lies (odd rows, a transposed a) is copied
    once, to aligned rows. A weight stored (N, K) and passed as w.t() (x @ w.T) is read in place by a
    backend that reads K-major B (`gemm_b_kmajor`), and copied for the others. Differentiable."""
    a, b, out_dtype, device = validate.gemm(a, b, out_dtype)
    if a.dim() > 2:  # leading dimensions are more rows: one (rows, K) @ (K, N)
        lead = a.shape[:-1]
        return gemm(a.reshape(math.prod(lead), a.shape[-1]), b, out_dtype, backend).reshape(*lead, b.shape[1])
    be = backends.resolve(backend, device, ("gemm",))
    a = _row_aligned(a if a.stride(-1) == 1 or a.shape[-1] <= 1 else a.contiguous())
    if not (be.gemm_b_kmajor and validate.kmajor(b)):
        b = _row_aligned(b if b.stride(-1) == 1 or b.shape[-1] <= 1 else b.contiguous())
    validate.index_range("a", a, be.max_index)
    validate.index_range("b", b, be.max_index)
    return (_gemm_impl if _direct(a, b) else _gemm)(a, b, out_dtype, be.name)


# ----------------------------------------------------------------------------- gemm_fp8


def _gemm_fp8_impl(a: torch.Tensor, b: torch.Tensor, a_scale: torch.Tensor, b_scale: torch.Tensor,
              out_dtype: torch.dtype, backend: str) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[0]
    c = _empty((M, N), out_dtype, a.device)
    if c.numel() == 0:
        return c
    if K == 0:
        return c.zero_()
    if validate.fp8_rowwise(a_scale, b_scale, M, N):  # torch._scaled_mm's row-wise scales, applied once a tile
        _launch(backend, gemm_fp8_rowwise_k, dict(M=M, N=N, K=K), a, b, a_scale, b_scale, c)
        return c
    # one scale per column of b, as a stride-0 view of the per-block scales (kernels/gemm_fp8.py)
    blk = validate.FP8_BLOCK
    sb = b_scale.unsqueeze(1).expand(b_scale.shape[0], blk, b_scale.shape[1])
    _launch(backend, gemm_fp8_k, dict(M=M, N=N, K=K), a, b, a_scale, sb, c)
    return c


_gemm_fp8 = torch.library.custom_op("tiles::gemm_fp8", _gemm_fp8_impl, mutates_args=())


@_gemm_fp8.register_fake
def _(a, b, a_scale, b_scale, out_dtype, backend):
    return a.new_empty((a.shape[0], b.shape[0]), dtype=out_dtype)


def gemm_fp8(a, b, a_scale, b_scale, out_dtype: Optional[torch.dtype] = torch.bfloat16,
             backend: Optional[str] = None):
    """Scaled 8-bit GEMM: C = (a * a_scale) @ (b * b_scale).T, with block scales (DeepSeek-V3 style) or
    row-wise ones (torch._scaled_mm's per-row / per-column form).

    a: (M, K) and b: (N, K), both float8_e4m3fn (NVIDIA Hopper, AMD gfx950) or both float8_e4m3fnuz
    (AMD gfx942). Block scales: a_scale (M, cdiv(K, 128)) f32, one scale per 1 x 128 block of a along
    K, and b_scale (cdiv(N, 128), cdiv(K, 128)) f32, one per 128 x 128 block of b; they are applied
    once per 128-wide K block. Row-wise scales: a_scale (M, 1), one per row of a, and b_scale (1, N),
    one per row of b (a column of C); they are applied once, to the f32 sum. Either way each 128-wide
    K block is summed on its own and added to an f32 accumulator. C (M, N) in `out_dtype` (bf16 or
    f32). Strides describe the operands: a (K, M) tensor is passed as its view `.t()`, and so on for b
    and the scales. K, M and N need not be multiples of 128 (the last block along K is partial).

    On Hopper the fp8 tensor cores read both operands K-major from shared memory: an operand whose
    K axis is not contiguous (a (K, M) or (K, N) storage) is transposed into a K-major copy once per
    call before the launch. The scales are read in place with their strides.

    Not differentiable: with grad mode on, an input that requires grad is refused (ValueError).
    """
    a, b, a_scale, b_scale, out_dtype, device = validate.gemm_fp8(a, b, a_scale, b_scale, out_dtype)
    if torch.is_grad_enabled():
        for n, t in (("a", a), ("b", b), ("a_scale", a_scale), ("b_scale", b_scale)):
            if t.requires_grad:  # gradients would be lost at backward: refuse before any work
                raise ValueError(f"{n} requires grad, but gemm_fp8 has no backward (an 8-bit GEMM's gradients "
                                 f"need scalings of their own); pass {n}.detach() or call it under torch.no_grad()")
    rowwise = validate.fp8_rowwise(a_scale, b_scale, a.shape[0], b.shape[0])
    be = backends.resolve(backend, device, ("gemm_fp8_rowwise" if rowwise else "gemm_fp8",))
    for n, t in (("a", a), ("b", b), ("a_scale", a_scale), ("b_scale", b_scale)):
        validate.index_range(n, t, be.max_index)
    check = getattr(be, "check_fp8", None)
    if check is not None:  # the machine's 8-bit format (OCP e4m3fn or e4m3fnuz), before any launch
        check("a", a.dtype, device)
    op = _gemm_fp8_impl if _direct(a, b, a_scale, b_scale) else _gemm_fp8
    return op(a, b, a_scale, b_scale, out_dtype, be.name)


# ----------------------------------------------------------------------------- layernorm, rotary


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


MAX_NORM_WIDTH = 16384


def _layernorm_impl(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
                    backend: str) -> torch.Tensor:
    N = x.shape[1]
    y = _empty(x.shape, x.dtype, x.device)
    if y.numel():
        NP = _pow2(N)
        BM = max(1, min(16, 16384 // NP))
        _launch(backend, layernorm_k, dict(N=N), x, weight, bias, y, eps, NP=NP, BM=BM)
    return y


_layernorm = torch.library.custom_op("tiles::layernorm", _layernorm_impl, mutates_args=())


@_layernorm.register_fake
def _(x, weight, bias, eps, backend):
    return x.new_empty(x.shape)


def _layernorm_setup(ctx, inputs, output):
    x, weight, bias, eps, backend = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps, ctx.bias_dtype = eps, bias.dtype


def _layernorm_backward(ctx, dy):
    """The backward in torch operations, in f32 (no kernel of tiles' own): the statistics are
    recomputed from x. Written in differentiable operations, so it has a derivative of its own."""
    x, weight = ctx.saved_tensors
    xf, dyf = x.float(), dy.float()
    mean = xf.mean(-1, keepdim=True)
    rstd = torch.rsqrt((xf - mean).square().mean(-1, keepdim=True) + ctx.eps)
    xhat = (xf - mean) * rstd
    g = dyf * weight.float()
    dx = rstd * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
    dw = (dyf * xhat).sum(0) if ctx.needs_input_grad[1] else None
    db = dyf.sum(0) if ctx.needs_input_grad[2] else None
    return (dx.to(x.dtype), None if dw is None else dw.to(weight.dtype),
            None if db is None else db.to(ctx.bias_dtype), None, None)


_layernorm.register_autograd(_layernorm_backward, setup_context=_layernorm_setup)


def layernorm(x, weight, bias, eps: float = 1e-5, backend: Optional[str] = None):
    """LayerNorm over the last dimension of x (any leading shape): (x - mean) / sqrt(var + eps) * weight
    + bias, computed in f32; output in x's dtype. Differentiable in x, weight and bias (the backward
    runs as torch operations)."""
    x, weight, bias, eps, device = validate.layernorm(x, weight, bias, eps)
    be = backends.resolve(backend, device, ("layernorm",))
    N = x.shape[-1]
    if N > MAX_NORM_WIDTH:
        raise ValueError(f"x's last dimension is {N}; layernorm supports up to {MAX_NORM_WIDTH}")
    x2 = x.reshape(-1, N)
    op = _layernorm_impl if _direct(x2, weight, bias) else _layernorm
    return op(x2, weight, bias, eps, be.name).reshape(x.shape)


def _rotary_impl(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, backend: str) -> torch.Tensor:
    y = _empty(x.shape, x.dtype, x.device)
    if y.numel():
        _launch(backend, rotary_k, dict(D=x.shape[3]), x, cos, sin, y, D=x.shape[3])
    return y


_rotary = torch.library.custom_op("tiles::rotary", _rotary_impl, mutates_args=())


@_rotary.register_fake
def _(x, cos, sin, backend):
    return x.new_empty(x.shape)  # contiguous, as the real op's output (a permuted x keeps its strides in empty_like)


def _rotary_setup(ctx, inputs, output):
    x, cos, sin, backend = inputs
    ctx.save_for_backward(x, cos, sin)
    ctx.backend = backend


def _rotary_backward(ctx, dy):
    """dx is the inverse rotation of dy, the same kernel with -sin; the tables' gradients (rarely
    wanted) are sums over batch and heads in torch operations."""
    x, cos, sin = ctx.saved_tensors
    dx = dcos = dsin = None
    if ctx.needs_input_grad[0]:
        dyc = dy.to(x.dtype).contiguous()
        nsin = -sin
        dx = (_rotary_impl if _direct(dyc, cos, nsin) else _rotary)(dyc, cos, nsin, ctx.backend)
    if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
        x1, x2 = x.float().chunk(2, dim=-1)
        d1, d2 = dy.float().chunk(2, dim=-1)
        if ctx.needs_input_grad[1]:
            dcos = (d1 * x1 + d2 * x2).sum((0, 2)).to(cos.dtype)
        if ctx.needs_input_grad[2]:
            dsin = (d2 * x1 - d1 * x2).sum((0, 2)).to(sin.dtype)
    return dx, dcos, dsin, None


_rotary.register_autograd(_rotary_backward, setup_context=_rotary_setup)


def rotary(x, cos, sin, backend: Optional[str] = None):
    """Rotary embedding (non-interleaved halves) of x (batch, seq, heads, head_dim) with (seq, head_dim/2)
    cos and sin tables: y1 = x1 cos - x2 sin, y2 = x2 cos + x1 sin; output in x's dtype. Differentiable in
    x (the backward is the same kernel, rotating back) and in the tables."""
    x, cos, sin, device = validate.rotary(x, cos, sin)
    be = backends.resolve(backend, device, ("rotary",))
    return (_rotary_impl if _direct(x, cos, sin) else _rotary)(x, cos, sin, be.name)
