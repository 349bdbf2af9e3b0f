"""attention forward and backward against float64, by the TESTING.md rule, on awkward shapes."""
import math

import pytest
import torch

import tiles
from reference import attention_ref, check_attention_fwd, check_attention_fwd_ragged, check_grads_rule, fl, max_err

# (B, Sq, Sk, H, Hkv, D): tails, Sq != Sk both ways, length 1, GQA ratios, MQA, batch > 1.
SHAPES = [
    (1, 1, 1, 1, 1, 64),
    (2, 77, 77, 4, 4, 64),
    (1, 130, 67, 4, 2, 64),
    (1, 67, 130, 8, 2, 128),
    (2, 1, 100, 4, 1, 128),
    (1, 190, 190, 6, 3, 128),
    (1, 64, 257, 2, 1, 64),
]


def _inputs(B, Sq, Sk, H, Hkv, D, dtype, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, Sq, H, D, generator=g).to(dtype).to(device)
    k = torch.randn(B, Sk, Hkv, D, generator=g).to(dtype).to(device)
    v = torch.randn(B, Sk, Hkv, D, generator=g).to(dtype).to(device)
    return q, k, v


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("causal", [False, True])
def test_forward(backend, shape, causal):
    name, device = backend
    dtype = torch.bfloat16 if sum(shape) % 2 else torch.float16  # both dtypes over the sample
    q, k, v = _inputs(*shape, dtype, device)
    scale = shape[-1] ** -0.5
    out, lse = tiles.attention(q, k, v, causal=causal, backend=name, return_lse=True)
    assert out.dtype == q.dtype and out.shape == q.shape and lse.shape == (shape[0], shape[3], shape[1])
    check_attention_fwd(out, lse, q, k, v, causal, scale)


def check_grads(name, q, k, v, causal, scale, loss, window=(-1, -1)):
    """dq, dk, dv of loss(out, lse) through tiles.attention, each within 3·E(lp) + fl of float64 autograd
    (TESTING.md), lp the same naive attention in the inputs' dtype. The inputs keep their strides."""
    grads = {}
    for kind in ("tiles", "ref", "lp"):
        dt = torch.float64 if kind == "ref" else q.dtype
        xs = [x.detach().to(dt).requires_grad_() for x in (q, k, v)]
        if kind == "tiles":
            out, lse = tiles.attention(*xs, causal=causal, scale=scale, backend=name, return_lse=True,
                                       window_size=window)
        else:
            out, lse = attention_ref(*xs, causal, scale, dtype=dt, window=window)
        loss(out, lse).backward()
        grads[kind] = [x.grad for x in xs]
    check_grads_rule("qkv", grads["tiles"], grads["ref"], grads["lp"])


@pytest.mark.parametrize("shape", [SHAPES[2], SHAPES[3], SHAPES[5]], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_backward(backend, shape, causal, dtype):
    name, device = backend
    q, k, v = _inputs(*shape, dtype, device, seed=1)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(2)).to(dtype).to(device)
    check_grads(name, q, k, v, causal, 0.7 / math.sqrt(shape[-1]), lambda out, lse: (out * do.to(out.dtype)).sum())


@pytest.mark.parametrize("H,Hkv,D", [(8, 2, 128), (4, 1, 64), (6, 3, 64)], ids=["gqa4", "mqa", "gqa2"])
@pytest.mark.parametrize("causal", [False, True])
def test_decode(backend, H, Hkv, D, causal):
    """One query row against a long cache (the api runs GQA's query heads as rows of one head): the output,
    the LSE and the gradients through both, as any other call's."""
    name, device = backend
    q, k, v = _inputs(3, 1, 300, H, Hkv, D, torch.bfloat16, device, seed=3)
    out, lse = tiles.attention(q, k, v, causal=causal, backend=name, return_lse=True)
    assert out.shape == q.shape and lse.shape == (3, H, 1)
    check_attention_fwd(out, lse, q, k, v, causal, D ** -0.5)
    g = torch.Generator().manual_seed(4)
    do, dl = torch.randn(q.shape, generator=g).to(device), torch.randn(3, H, 1, generator=g).to(device)
    check_grads(name, q, k, v, causal, D ** -0.5,
                lambda out, lse: (out * do.to(out.dtype)).sum() + (lse * dl.to(lse.dtype)).sum())


@pytest.mark.parametrize("Sq,H,Hkv,D", [(2, 8, 2, 128), (5, 4, 1, 64), (64, 6, 3, 64)],
                         ids=["2rows-gqa4", "5rows-mqa", "64rows-gqa2"])
@pytest.mark.parametrize("causal", [False, True])
def test_few_rows(backend, monkeypatch, Sq, H, Hkv, D, causal):
    """A few query rows a sequence under GQA / MQA (speculative decoding): the query heads run as grouped
    rows, and causal, the keys every row sees in that call and the last Sq - 1 in a second, merged by the
    LSE (here from 8 keys, so that a small cache takes that path). Output, LSE and gradients as any call's."""
    monkeypatch.setattr(tiles.api, "GROUPED_CAUSAL_KEYS", 8)
    name, device = backend
    q, k, v = _inputs(2, Sq, 200, H, Hkv, D, torch.bfloat16, device, seed=6)
    out, lse = tiles.attention(q, k, v, causal=causal, backend=name, return_lse=True)
    assert out.shape == q.shape and lse.shape == (2, H, Sq)
    check_attention_fwd(out, lse, q, k, v, causal, D ** -0.5)
    g = torch.Generator().manual_seed(7)
    do, dl = torch.randn(q.shape, generator=g).to(device), torch.randn(2, H, Sq, generator=g).to(device)
    check_grads(name, q, k, v, causal, D ** -0.5,
                lambda out, lse: (out * do.to(out.dtype)).sum() + (lse * dl.to(lse.dtype)).sum())


@pytest.mark.parametrize("Sq,H,Hkv,D,causal", [(1, 8, 2, 128, True), (4, 8, 2, 64, False), (4, 4, 1, 64, True),
                                              (130, 2, 2, 128, True)],
                         ids=["decode-gqa4", "4rows-gqa4", "4rows-mqa-causal", "130rows-mha-causal"])
def test_ragged_cache(backend, Sq, H, Hkv, D, causal):
    """A KV cache of ragged lengths (cache_seqlens): each sequence attends its own first keys of the
    cache, causal aligned to them; a sequence of no key gives zeros and LSE +inf, a full one the whole
    cache. The cache's rows past a sequence's count hold NaN (memory never written), which must not reach
    the output: they read as zeros. Then the counts change in place and the same call reads the new ones
    (the rows up to them now finite values left from before, a stale cache)."""
    name, device = backend
    B, Sk = 4, 300
    q, k, v = _inputs(B, Sq, Sk, H, Hkv, D, torch.bfloat16, device, seed=8)
    lens = torch.tensor([Sk, 129, 0, 1], dtype=torch.int32, device=device)
    for b, n in enumerate(lens.tolist()):
        k[b, n:], v[b, n:] = float("nan"), float("nan")
    out, lse = tiles.attention(q, k, v, causal=causal, backend=name, return_lse=True, cache_seqlens=lens)
    assert out.shape == q.shape and lse.shape == (B, H, Sq)
    assert not torch.isnan(out).any() and not torch.isnan(lse).any()
    check_attention_fwd_ragged(out, lse, q, k, v, lens, causal and Sq > 1, D ** -0.5)
    for b, n in enumerate(lens.tolist()):
        k[b, n:], v[b, n:] = 8.0, -300.0
    lens.copy_(torch.tensor([5, 0, 64, 2], dtype=torch.int32))
    for b, n in enumerate(lens.tolist()):
        k[b, n:], v[b, n:] = float("nan"), float("nan")
    out = tiles.attention(q, k, v, causal=causal, backend=name, cache_seqlens=lens)
    check_attention_fwd_ragged(out, None, q, k, v, lens, causal and Sq > 1, D ** -0.5)


def _paged(cache, table, pages):
    """The pool of `pages` pages that holds sequence b's rows [j · P, (j + 1) · P) of `cache` in page
    table[b, j]; the pages no sequence holds are NaN."""
    B, S, Hkv, D = cache.shape
    P = S // table.shape[1]
    pool = torch.full((pages, P, Hkv, D), float("nan"), dtype=cache.dtype, device=cache.device)
    for b in range(B):
        for j in range(table.shape[1]):
            pool[int(table[b, j])] = cache[b, j * P:(j + 1) * P]
    return pool


@pytest.mark.parametrize("Sq,H,Hkv,D,causal", [(1, 8, 2, 128, True), (4, 8, 2, 64, False), (130, 2, 2, 64, True)],
                         ids=["decode-gqa4", "4rows-gqa4", "130rows-mha-causal"])
def test_paged_cache(backend, Sq, H, Hkv, D, causal):
    """A paged cache (block_table): each sequence's keys in pages of a shuffled pool, the pages no sequence
    holds and the rows past each count NaN. Each sequence against float64 over its own keys; then the
    counts and the table change in place and the same call follows them."""
    name, device = backend
    B, npages, P = 3, 3, 256
    q, k, v = _inputs(B, Sq, npages * P, H, Hkv, D, torch.bfloat16, device, seed=9)
    lens = torch.tensor([npages * P, 300, 0], dtype=torch.int32, device=device)
    for b, n in enumerate(lens.tolist()):
        k[b, n:], v[b, n:] = float("nan"), float("nan")
    pages = B * npages + 2
    g = torch.Generator().manual_seed(10)
    table = torch.randperm(pages, generator=g)[:B * npages].view(B, npages).to(torch.int32).to(device)
    pk, pv = _paged(k, table, pages), _paged(v, table, pages)
    out, lse = tiles.attention(q, pk, pv, causal=causal, backend=name, return_lse=True, cache_seqlens=lens,
                               block_table=table)
    assert not torch.isnan(out).any() and not torch.isnan(lse).any()
    check_attention_fwd_ragged(out, lse, q, k, v, lens, causal and Sq > 1, D ** -0.5)
    lens.copy_(torch.tensor([257, 768, 5], dtype=torch.int32))
    table.copy_(torch.randperm(pages, generator=g)[:B * npages].view(B, npages).to(torch.int32))
    k, v = (torch.nan_to_num(x, nan=0.5) for x in (k, v))  # the rows the new counts reach
    pk.copy_(_paged(k, table, pages))
    pv.copy_(_paged(v, table, pages))
    out = tiles.attention(q, pk, pv, causal=causal, backend=name, cache_seqlens=lens, block_table=table)
    check_attention_fwd_ragged(out, None, q, k, v, lens, causal and Sq > 1, D ** -0.5)


@pytest.mark.parametrize("Sq,Sk,H,Hkv,D,causal,window", [
    (300, 300, 4, 2, 128, True, (100, -1)), (200, 350, 2, 2, 64, False, (64, 30)), (1, 700, 8, 2, 64, True, (129, -1)),
    (130, 500, 2, 1, 128, True, (0, 0)), (64, 64, 2, 2, 64, False, (-1, 5)),
    (300, 150, 2, 1, 64, True, (2 ** 31 - 1, -1)), (100, 200, 2, 2, 64, False, (2 ** 31 - 1, 2 ** 31 - 1))],
    ids=["causal-left100", "band-64-30", "decode-gqa-left129", "own-key", "right5", "left-past-every-key",
         "edges-past-every-key"])
def test_sliding_window(backend, Sq, Sk, H, Hkv, D, causal, window):
    """window_size=(left, right): each row sees the keys from left before its bottom-right diagonal to right
    after it (causal: up to it). The loop starts at the window's first block; decode keeps the left edge.
    The gradients too: dK / dV's query loop from the first row whose diagonal reaches the key block to the
    last whose window does, dQ's key loop as the forward's. Edges past every key (2^31 - 1, which 32-bit
    key positions would wrap) are no edges."""
    name, device = backend
    q, k, v = _inputs(2, Sq, Sk, H, Hkv, D, torch.bfloat16, device, seed=11)
    out, lse = tiles.attention(q, k, v, causal=causal, backend=name, return_lse=True, window_size=window)
    check_attention_fwd(out, lse, q, k, v, causal, D ** -0.5, window)
    g = torch.Generator().manual_seed(13)
    do, dl = torch.randn(q.shape, generator=g).to(device), torch.randn(2, H, Sq, generator=g).to(device)
    check_grads(name, q, k, v, causal, D ** -0.5,
                lambda out, lse: (out * do.to(out.dtype)).sum() + (lse * dl.to(lse.dtype)).sum(),
                window)


def test_sliding_window_over_a_ragged_cache(backend):
    """A window over a cache of ragged lengths: each sequence's edges from its own count."""
    name, device = backend
    q, k, v = _inputs(3, 4, 600, 4, 2, 64, torch.bfloat16, device, seed=12)
    lens = torch.tensor([600, 300, 2], dtype=torch.int32, device=device)
    out, lse = tiles.attention(q, k, v, causal=True, backend=name, return_lse=True, cache_seqlens=lens,
                               window_size=(200, 0))
    check_attention_fwd_ragged(out, lse, q, k, v, lens, True, 64 ** -0.5, (200, 0))


@pytest.mark.parametrize("Sq,Sk,causal,window", [(100, 100, True, (-1, -1)), (1, 300, True, (63, -1)),
                                                 (130, 70, True, (-1, -1))],
                         ids=["causal", "decode-window", "rows-before-keys"])
def test_sinks(backend, Sq, Sk, causal, window):
    """Attention sinks (gpt-oss): one logit a head joins each row's softmax with a value of zero. Output and
    LSE against float64 with the sink's column, and the gradients of q, k, v and the sinks by the rule; a
    row that sees no key gives zeros and LSE = its head's sink."""
    name, device = backend
    H, D = 4, 64
    q, k, v = _inputs(2, Sq, Sk, H, 2, D, torch.bfloat16, device, seed=14)
    sinks = torch.randn(H, generator=torch.Generator().manual_seed(15)).to(device)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(16)).to(device)
    grads, outs = {}, {}
    for kind in ("tiles", "ref", "lp"):
        dt = torch.float64 if kind == "ref" else q.dtype
        xs = [x.detach().to(dt).requires_grad_() for x in (q, k, v)]
        s = sinks.detach().to(torch.float64 if kind == "ref" else torch.float32).requires_grad_()
        if kind == "tiles":
            out, lse = tiles.attention(*xs, causal=causal, backend=name, return_lse=True, window_size=window, sinks=s)
        else:
            out, lse = attention_ref(*xs, causal, D ** -0.5, dtype=dt, window=window, sinks=s)
        (out * do.to(out.dtype)).sum().backward()
        grads[kind], outs[kind] = [x.grad for x in xs] + [s.grad], (out, lse)
    out, lse = outs["tiles"]
    ref, ref_lse = outs["ref"]
    assert max_err(out, ref) <= 2 * max_err(outs["lp"][0], ref) + fl(ref)
    assert torch.allclose(lse.double(), ref_lse, rtol=1e-4, atol=1e-4)
    check_grads_rule(("q", "k", "v", "sinks"), grads["tiles"], grads["ref"], grads["lp"])
    if Sq > Sk:  # rows before the first key: the sink's alone
        assert torch.all(out[:, :Sq - Sk] == 0) and torch.allclose(lse[:, :, :Sq - Sk], sinks[None, :, None].expand(2, H, Sq - Sk))


def test_fully_masked_rows_are_zero_with_finite_grads(backend):
    name, device = backend
    q, k, v = _inputs(1, 50, 20, 2, 1, 64, torch.bfloat16, device)
    q.requires_grad_()
    out, lse = tiles.attention(q, k, v, causal=True, backend=name, return_lse=True)
    assert torch.all(out[:, :30] == 0), "rows that see no key must be exactly zero"
    assert torch.all(torch.isinf(lse[..., :30])) and torch.all(torch.isfinite(lse[..., 30:]))
    out.float().sum().backward()
    assert torch.isfinite(q.grad).all() and torch.all(q.grad[:, :30] == 0)


def test_non_contiguous_views(backend):
    name, device = backend
    B, S, H, D = 2, 70, 4, 64
    g = torch.Generator().manual_seed(3)
    # q: a transposed BHSD tensor; k: a head slice of a wider tensor; v: batch expanded with stride 0.
    q = torch.randn(B, H, S, D, generator=g).to(torch.bfloat16).to(device).transpose(1, 2)
    k = torch.randn(B, S, H + 3, D, generator=g).to(torch.bfloat16).to(device)[:, :, 1:H + 1]
    v = torch.randn(1, S, H, D, generator=g).to(torch.bfloat16).to(device).expand(B, S, H, D)
    out = tiles.attention(q, k, v, causal=True, backend=name)
    check_attention_fwd(out, None, q, k, v, True, D ** -0.5)
    dout = torch.randn(B, S, H, 2 * D, generator=g).to(torch.bfloat16).to(device)[..., ::2]  # non-contiguous
    assert not (q.is_contiguous() or k.is_contiguous() or v.is_contiguous() or dout.is_contiguous())
    check_grads(name, q, k, v, False, D ** -0.5, lambda out, lse: (out * dout.to(out.dtype)).sum())


def test_forward_is_bitwise_repeatable(backend):
    name, device = backend
    q, k, v = _inputs(1, 100, 90, 4, 2, 64, torch.bfloat16, device, seed=5)
    a = tiles.attention(q, k, v, causal=True, backend=name)
    b = tiles.attention(q, k, v, causal=True, backend=name)
    assert torch.equal(a, b)


def test_empty_inputs(backend):
    name, device = backend
    for shape in ((0, 10, 10, 2, 2, 64), (1, 0, 10, 2, 2, 64)):
        q, k, v = _inputs(*shape, torch.bfloat16, device)
        assert tiles.attention(q, k, v, backend=name).shape == q.shape
    q, k, v = _inputs(1, 5, 0, 2, 2, 64, torch.bfloat16, device)
    out, lse = tiles.attention(q, k, v, backend=name, return_lse=True)
    assert torch.all(out == 0) and torch.all(torch.isinf(lse))


def test_nan_stays_in_its_rows(backend):
    name, device = backend
    q, k, v = _inputs(1, 40, 40, 2, 2, 64, torch.bfloat16, device, seed=7)
    q[0, 3, 1, 5] = float("nan")
    out = tiles.attention(q, k, v, backend=name)
    bad = torch.isnan(out).any(-1)
    assert bad[0, 3, 1] and bad.sum() == 1


def test_large_logits(backend):
    name, device = backend
    q, k, v = _inputs(1, 64, 64, 2, 2, 64, torch.bfloat16, device, seed=8)
    q = q * 40
    out, lse = tiles.attention(q, k, v, backend=name, return_lse=True)
    assert torch.isfinite(out).all() and torch.isfinite(lse).all()
    check_attention_fwd(out, lse, q, k, v, False, 64 ** -0.5)


def test_gradient_through_lse(backend):
    name, device = backend
    q, k, v = _inputs(1, 70, 90, 2, 1, 64, torch.bfloat16, device, seed=9)
    check_grads(name, q, k, v, True, 64 ** -0.5, lambda out, lse: out.float().sum() + lse.float().sum())


def test_gradient_of_gradient_is_refused(backend):
    """backward(create_graph=True) gives the first-order gradients; differentiating them again raises a
    clear error instead of torch's "no autograd formula"."""
    name, device = backend
    q, k, v = _inputs(1, 70, 70, 2, 1, 64, torch.bfloat16, device, seed=4)
    xs = [x.detach().requires_grad_() for x in (q, k, v)]
    loss = (tiles.attention(*xs, causal=True, backend=name).float() ** 2).sum()
    grads = torch.autograd.grad(loss, xs, create_graph=True)
    ys = [x.detach().requires_grad_() for x in (q, k, v)]
    (tiles.attention(*ys, causal=True, backend=name).float() ** 2).sum().backward()
    for g, y in zip(grads, ys):
        assert torch.equal(g.detach(), y.grad)
    with pytest.raises(RuntimeError, match="tiles.attention has first-order gradients only"):
        grads[0].sum().backward()


# (1, 200, 60, ...): causal, its first 140 query rows see no key, and no key block visits the first
# two query blocks (their dQ rows come from dQacc's zeros)
@pytest.mark.parametrize("shape", [SHAPES[3], SHAPES[5], SHAPES[2], SHAPES[6], (1, 200, 60, 4, 2, 64)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("causal", [False, True])
def test_backward_fused(backend, shape, causal, monkeypatch):
    """The same rule through attention_bwd_fused (dQ added up in the dK/dV pass), on the backends
    that lower it (at every head dim with FUSED_BACKWARD; without it, at D = 64 only)."""
    name, _ = backend
    be = tiles.backends.get(name)
    if not hasattr(type(be), "FUSED_BACKWARD"):
        pytest.skip(f"backend {name} has no fused attention backward")
    monkeypatch.setattr(type(be), "FUSED_BACKWARD", True)
    launched = []
    launch = tiles.api._launch
    monkeypatch.setattr(tiles.api, "_launch", lambda b, kfn, *a, **kw: (launched.append(kfn.name), launch(b, kfn, *a, **kw)))
    test_backward(backend, shape, causal, torch.bfloat16)
    assert "attention_bwd_fused" in launched and "attention_bwd_dq" not in launched, launched
