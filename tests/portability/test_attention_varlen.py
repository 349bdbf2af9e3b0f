"""Packed sequences of different lengths (tiles.attention_varlen, FlashAttention's varlen call) against
float64, sequence by sequence, by the TESTING.md rule, on every backend present.

The lengths mix an empty sequence, sequences shorter than a row tile, one that ends inside a tile and
one longer than several; each sequence's queries and keys sit between the others', so a program that
read past its own keys, or stored past its own rows, would show up in its neighbours (the output is
poisoned with NaN before the call, so a row left unwritten shows up as well)."""
import itertools
import math

import pytest
import torch

import tiles
from reference import attention_ref, check_attention_fwd, check_grads_rule, fl, max_err


def _offsets(lengths, device):
    return torch.tensor([0] + list(itertools.accumulate(lengths)), dtype=torch.int32, device=device)


def _packed(lq, lk, H, Hkv, D, device, seed=0, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(sum(lq), H, D, generator=g).to(dtype).to(device)
    k = torch.randn(sum(lk), Hkv, D, generator=g).to(dtype).to(device)
    v = torch.randn(sum(lk), Hkv, D, generator=g).to(dtype).to(device)
    return q, k, v


def _check_each(out, lse, q, k, v, lq, lk, causal, scale, window=(-1, -1)):
    cq, ck = _offsets(lq, "cpu").tolist(), _offsets(lk, "cpu").tolist()
    for b in range(len(lq)):
        qs, ks, vs = q[cq[b]:cq[b + 1]][None], k[ck[b]:ck[b + 1]][None], v[ck[b]:ck[b + 1]][None]
        if lq[b] == 0:
            continue
        lse_b = None if lse is None else lse[:, cq[b]:cq[b + 1]][None]
        if lk[b] == 0:  # no key: zeros, LSE +inf
            assert torch.equal(out[cq[b]:cq[b + 1]], torch.zeros_like(out[cq[b]:cq[b + 1]])), b
            assert lse_b is None or bool((lse_b == math.inf).all()), b
            continue
        check_attention_fwd(out[cq[b]:cq[b + 1]][None], lse_b, qs, ks, vs, causal, scale, window=window)


CASES = [  # (query lengths, key lengths, H, Hkv, D)
    ([5, 130, 0, 64, 300], [7, 200, 3, 64, 300], 4, 2, 64),
    ([1, 257, 128], [1, 129, 500], 2, 1, 128),
    ([90, 0, 33], [90, 0, 400], 4, 4, 128),  # a sequence with no query and no key
]


@pytest.mark.parametrize("case", CASES, ids=["gqa-d64", "mqa-d128", "empty-d128"])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_varlen_each_sequence_alone(backend, case, causal):
    name, device = backend
    lq, lk, H, Hkv, D = case
    q, k, v = _packed(lq, lk, H, Hkv, D, device, seed=len(lq) + causal)
    out, lse = tiles.attention_varlen(q, k, v, _offsets(lq, device), _offsets(lk, device), max(lq), max(lk),
                                      causal=causal, backend=name, return_lse=True)
    assert out.shape == q.shape and out.dtype == q.dtype and lse.shape == (H, sum(lq))
    assert not torch.isnan(out).any() and not torch.isnan(lse).any()
    _check_each(out.cpu(), lse.cpu(), q.cpu(), k.cpu(), v.cpu(), lq, lk, causal, D ** -0.5)


def test_attention_varlen_matches_attention_to_the_bit(backend):
    """A sequence's output does not depend on its neighbours: each equals tiles.attention on it alone
    (same tiles, same order), and a longer max_seqlen (more, empty, programs) changes nothing."""
    name, device = backend
    lq, lk = [200, 3, 129], [150, 300, 129]
    q, k, v = _packed(lq, lk, 4, 2, 128, device, seed=3)
    cq, ck = _offsets(lq, device), _offsets(lk, device)
    out = tiles.attention_varlen(q, k, v, cq, ck, max(lq), max(lk), causal=True, backend=name)
    wide = tiles.attention_varlen(q, k, v, cq, ck, 1000, 1000, causal=True, backend=name)
    assert torch.equal(out, wide)
    for b, (a, e) in enumerate(zip(cq.tolist(), cq.tolist()[1:])):
        c0, c1 = ck[b].item(), ck[b + 1].item()
        alone = tiles.attention(q[None, a:e], k[None, c0:c1], v[None, c0:c1], causal=True, backend=name)
        assert torch.equal(out[a:e], alone[0]), b


def test_attention_varlen_sliding_window(backend):
    name, device = backend
    lq, lk, window = [300, 17, 140], [300, 40, 200], (64, 0)
    q, k, v = _packed(lq, lk, 2, 1, 64, device, seed=5)
    out, lse = tiles.attention_varlen(q, k, v, _offsets(lq, device), _offsets(lk, device), max(lq), max(lk),
                                      causal=True, window_size=window, backend=name, return_lse=True)
    _check_each(out.cpu(), lse.cpu(), q.cpu(), k.cpu(), v.cpu(), lq, lk, True, 64 ** -0.5, window=window)


def test_attention_varlen_offsets_on_the_cpu(backend):
    """Offsets on the CPU are checked there and copied over (pinned memory, no synchronization): the same
    answer as offsets on q's device."""
    name, device = backend
    lq, lk = [70, 130], [90, 260]
    q, k, v = _packed(lq, lk, 2, 2, 64, device, seed=6)
    on_host = tiles.attention_varlen(q, k, v, _offsets(lq, "cpu"), _offsets(lk, "cpu"), 130, 260, backend=name)
    here = tiles.attention_varlen(q, k, v, _offsets(lq, device), _offsets(lk, device), 130, 260, backend=name)
    assert torch.equal(on_host, here)


# ----------------------------------------------------------------------------- the backward

def _finite(lse):
    """The LSE where a row saw a key, 0 where it saw none (+inf there, whose gradient the loss leaves out)."""
    return torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))


def _varlen_grads(name, q, k, v, lq, lk, causal, do, dl, window=(-1, -1)):
    """dq, dk, dv of sum(out · do) + sum(lse · dl) through tiles.attention_varlen, the inputs' rows poisoned
    into nothing: the gradients are fresh tensors the backward wrote."""
    xs = [x.detach().requires_grad_() for x in (q, k, v)]
    out, lse = tiles.attention_varlen(*xs, _offsets(lq, q.device), _offsets(lk, q.device), max(lq), max(lk),
                                      causal=causal, window_size=window, backend=name, return_lse=True)
    ((out.float() * do.to(out.device)).sum() + (_finite(lse) * dl.to(lse.device)).sum()).backward()
    return [x.grad.cpu() for x in xs]


def _reference_grads(q, k, v, causal, scale, do, dl, dtype, window=(-1, -1)):
    """One sequence's gradients of the same loss through the naive attention in `dtype` (float64: the
    reference; the inputs' dtype: the low-precision computation the rule compares against)."""
    xs = [x.detach().to(dtype).requires_grad_() for x in (q, k, v)]
    out, lse = attention_ref(*xs, causal, scale, dtype=dtype, window=window)
    ((out.to(dtype) * do.to(dtype)).sum() + (_finite(lse) * dl[None].to(lse.dtype)).sum()).backward()
    return [x.grad for x in xs]


def _check_grads_each(grads, q, k, v, lq, lk, causal, scale, do, dl, window=(-1, -1)):
    """Each sequence's rows of the packed gradients within 3·E(lp) + fl of float64 autograd on that
    sequence alone (TESTING.md); a sequence with no key gets dq = 0, one with no query dk = dv = 0."""
    cq, ck = _offsets(lq, "cpu").tolist(), _offsets(lk, "cpu").tolist()
    for b in range(len(lq)):
        rq, rk = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
        mine = (grads[0][rq], grads[1][rk], grads[2][rk])
        if lq[b] == 0 or lk[b] == 0:
            for g in mine:
                assert torch.equal(g, torch.zeros_like(g)), f"sequence {b} sees no key or has no query: zeros"
            continue
        seq = (q[rq][None], k[rk][None], v[rk][None])
        ref = _reference_grads(*seq, causal, scale, do[rq][None], dl[:, rq], torch.float64, window)
        lp = _reference_grads(*seq, causal, scale, do[rq][None], dl[:, rq], q.dtype, window)
        check_grads_rule("qkv", [g[None] for g in mine], ref, lp, where=f"sequence {b}, ")


def _upstream(lq, H, D, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(sum(lq), H, D, generator=g), torch.randn(H, sum(lq), generator=g)


@pytest.mark.parametrize("case", CASES, ids=["gqa-d64", "mqa-d128", "empty-d128"])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_varlen_backward_each_sequence_alone(backend, monkeypatch, case, causal):
    """dq, dk, dv through the output and the LSE, sequence by sequence against float64. The gradients
    are poisoned with NaN before the kernels write them, so a row the backward leaves unwritten fails."""
    monkeypatch.setenv("TILES_POISON", "1")
    name, device = backend
    lq, lk, H, Hkv, D = case
    q, k, v = _packed(lq, lk, H, Hkv, D, device, seed=10 + causal)
    do, dl = _upstream(lq, H, D, seed=11)
    grads = _varlen_grads(name, q, k, v, lq, lk, causal, do, dl)
    _check_grads_each(grads, q.cpu(), k.cpu(), v.cpu(), lq, lk, causal, D ** -0.5, do, dl)


def test_attention_varlen_backward_sliding_window(backend):
    name, device = backend
    lq, lk, window = [300, 17, 140], [300, 40, 200], (64, 0)
    q, k, v = _packed(lq, lk, 2, 1, 64, device, seed=12)
    do, dl = _upstream(lq, 2, 64, seed=13)
    grads = _varlen_grads(name, q, k, v, lq, lk, True, do, dl, window)
    _check_grads_each(grads, q.cpu(), k.cpu(), v.cpu(), lq, lk, True, 64 ** -0.5, do, dl, window)


def test_attention_varlen_backward_matches_attention_to_the_bit(backend):
    """Each sequence's gradients equal tiles.attention's on it alone (same tiles, same order; more than
    64 query rows each, so that the plain call takes no grouped-rows path)."""
    name, device = backend
    lq, lk = [200, 65, 129], [150, 300, 129]
    q, k, v = _packed(lq, lk, 4, 2, 128, device, seed=14)
    do, dl = _upstream(lq, 4, 128, seed=15)
    grads = _varlen_grads(name, q, k, v, lq, lk, True, do, dl)
    cq, ck = _offsets(lq, "cpu").tolist(), _offsets(lk, "cpu").tolist()
    for b in range(len(lq)):
        rq, rk = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
        xs = [x.detach().requires_grad_() for x in (q[None, rq], k[None, rk], v[None, rk])]
        out, lse = tiles.attention(*xs, causal=True, backend=name, return_lse=True)
        ((out.float() * do[None, rq].to(device)).sum() + (_finite(lse) * dl[None, :, rq].to(device)).sum()).backward()
        for n, mine, x in zip("qkv", (grads[0][rq], grads[1][rk], grads[2][rk]), xs):
            assert torch.equal(mine, x.grad[0].cpu()), f"sequence {b}, d{n}"


def test_attention_varlen_backward_ignores_its_neighbours(backend):
    """A sequence's gradients do not depend on the other sequences' values: with NaN in every input and
    upstream gradient of the middle sequence, the first and last get the same gradients to the bit (the
    programs of a sequence's last blocks read past its rows, into its neighbour's)."""
    name, device = backend
    lq, lk = [100, 70, 90], [130, 60, 80]
    q, k, v = _packed(lq, lk, 4, 2, 64, device, seed=16)
    do, dl = _upstream(lq, 4, 64, seed=17)
    clean = _varlen_grads(name, q, k, v, lq, lk, False, do, dl)
    rq, rk = slice(lq[0], lq[0] + lq[1]), slice(lk[0], lk[0] + lk[1])
    q2, k2, v2, do2, dl2 = q.clone(), k.clone(), v.clone(), do.clone(), dl.clone()
    for t, r in ((q2, rq), (k2, rk), (v2, rk), (do2, rq)):
        t[r] = float("nan")
    dl2[:, rq] = float("nan")
    dirty = _varlen_grads(name, q2, k2, v2, lq, lk, False, do2, dl2)
    for n, a, b_, r in zip("qkv", clean, dirty, (rq, rk, rk)):
        keep = torch.ones(a.shape[0], dtype=torch.bool)
        keep[r] = False
        assert torch.equal(a[keep], b_[keep]), f"d{n} of the clean sequences changed"
        assert torch.isnan(b_[r]).all(), f"d{n} of the NaN sequence"


def test_attention_varlen_backward_refuses_a_second_order(backend):
    name, device = backend
    lq, lk = [70, 40], [70, 90]
    q, k, v = _packed(lq, lk, 2, 1, 64, device, seed=18)
    xs = [x.detach().requires_grad_() for x in (q, k, v)]
    out = tiles.attention_varlen(*xs, _offsets(lq, device), _offsets(lk, device), 70, 90, causal=True, backend=name)
    grads = torch.autograd.grad((out.float() ** 2).sum(), xs, create_graph=True)
    with pytest.raises(RuntimeError, match="first-order gradients only"):
        sum(g.float().sum() for g in grads).backward()


def test_attention_varlen_backward_costs_no_synchronization(backend):
    """A training step with the offsets on the CPU synchronizes nothing: they are checked there and copied
    through pinned memory, and the backward builds its table of key blocks on the device (torch's sync
    debug mode raises where a call would synchronize)."""
    name, device = backend
    if device == "cpu":
        pytest.skip("torch's sync debug mode watches a CUDA device")
    lq, lk = [70, 130, 0, 200], [90, 260, 5, 200]
    q, k, v = _packed(lq, lk, 4, 2, 64, device, seed=19)
    xs = [x.detach().requires_grad_() for x in (q, k, v)]
    cq, ck = _offsets(lq, "cpu"), _offsets(lk, "cpu")
    ref = _varlen_grads(name, q, k, v, lq, lk, True, torch.ones(sum(lq), 4, 64), torch.zeros(4, sum(lq)))  # compiled
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = tiles.attention_varlen(*xs, cq, ck, max(lq), max(lk), causal=True, backend=name)
        out.float().sum().backward()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    for n, x, r in zip("qkv", xs, ref):
        assert torch.equal(x.grad.cpu(), r), f"d{n}"


# ----------------------------------------------------------------------------- a paged cache (block_table)

def _paged(lk, Hkv, D, device, page=256, seed=0, dtype=torch.bfloat16):
    """Each sequence's keys in pages of a shuffled pool, one more page a row than its keys need, the rest of
    the pool NaN (a cache's rows past a count may hold anything): (k_pool, v_pool, block_table, the
    sequences' keys and values packed end to end)."""
    g = torch.Generator().manual_seed(seed)
    per = max(-(-n // page) for n in lk) + 1
    npages = len(lk) * per + 3
    order = torch.randperm(npages, generator=g)
    table = order[:len(lk) * per].view(len(lk), per).to(torch.int32)
    kp = torch.full((npages, page, Hkv, D), float("nan"), dtype=dtype)
    vp = kp.clone()
    ks, vs = [], []
    for b, n in enumerate(lk):
        kb, vb = (torch.randn(n, Hkv, D, generator=g).to(dtype) for _ in range(2))
        for j in range(-(-n // page)):
            rows = slice(j * page, min(n, (j + 1) * page))
            kp[table[b, j], :rows.stop - rows.start] = kb[rows]
            vp[table[b, j], :rows.stop - rows.start] = vb[rows]
        ks.append(kb)
        vs.append(vb)
    return kp.to(device), vp.to(device), table.to(device), torch.cat(ks).to(device), torch.cat(vs).to(device)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_varlen_paged_cache(backend, causal):
    """Chunked prefill: packed query chunks over keys in a paged cache, each chunk's queries after the keys
    cached before them (causal aligns them to the last of its keys). Each sequence against float64 on its
    own keys, and bitwise the call on the same keys packed end to end (the same key blocks, in order); the
    NaN in the pool past each count is never read into the arithmetic."""
    name, device = backend
    lq, lk, H, Hkv, D = [1, 130, 0, 64], [300, 200, 3, 700], 4, 2, 128
    g = torch.Generator().manual_seed(20 + causal)
    q = torch.randn(sum(lq), H, D, generator=g).to(torch.bfloat16).to(device)
    kp, vp, table, k, v = _paged(lk, Hkv, D, device, seed=21)
    cq, ck = _offsets(lq, device), _offsets(lk, device)
    out, lse = tiles.attention_varlen(q, kp, vp, cq, ck, max(lq), max(lk), causal=causal, backend=name,
                                      return_lse=True, block_table=table)
    assert out.shape == q.shape and lse.shape == (H, sum(lq)) and not torch.isnan(out).any()
    _check_each(out.cpu(), lse.cpu(), q.cpu(), k.cpu(), v.cpu(), lq, lk, causal, D ** -0.5)
    flat, flat_lse = tiles.attention_varlen(q, k, v, cq, ck, max(lq), max(lk), causal=causal, backend=name,
                                            return_lse=True)
    assert torch.equal(out, flat) and torch.equal(lse, flat_lse)


def test_attention_varlen_paged_cache_window_and_host_tables(backend):
    """A sliding window over the paged keys, with the offsets and the table on the CPU (checked there)."""
    name, device = backend
    lq, lk, window = [40, 300], [512, 300], (100, 0)
    g = torch.Generator().manual_seed(22)
    q = torch.randn(sum(lq), 2, 64, generator=g).to(torch.bfloat16).to(device)
    kp, vp, table, k, v = _paged(lk, 1, 64, device, seed=23)
    out = tiles.attention_varlen(q, kp, vp, _offsets(lq, "cpu"), _offsets(lk, "cpu"), max(lq), max(lk), causal=True,
                                 window_size=window, backend=name, block_table=table.cpu())
    _check_each(out.cpu(), None, q.cpu(), k.cpu(), v.cpu(), lq, lk, True, 64 ** -0.5, window=window)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_varlen_sinks(backend, causal):
    """Attention sinks over packed sequences (gpt-oss's prefill): each sequence's output and LSE against
    float64 with the sink's column, and the gradients of q, k, v and the sinks (summed over the
    sequences) by the rule; rows that see no key give zeros and LSE = their head's sink."""
    name, device = backend
    lq, lk, H, Hkv, D = [90, 0, 140, 33], [60, 5, 140, 200], 4, 2, 64
    q, k, v = _packed(lq, lk, H, Hkv, D, device, seed=24 + causal)
    sinks = torch.randn(H, generator=torch.Generator().manual_seed(25)).to(device)
    do = torch.randn(sum(lq), H, D, generator=torch.Generator().manual_seed(26))
    cq, ck = _offsets(lq, "cpu").tolist(), _offsets(lk, "cpu").tolist()
    grads, outs = {}, {}
    for kind in ("tiles", "ref", "lp"):
        dt = torch.float64 if kind == "ref" else q.dtype
        xs = [x.detach().cpu().to(dt).requires_grad_() for x in (q, k, v)]
        s = sinks.detach().cpu().to(torch.float64 if kind == "ref" else torch.float32).requires_grad_()
        if kind == "tiles":
            x_dev = [x.detach().to(device).requires_grad_() for x in xs]
            s_dev = s.detach().to(device).requires_grad_()
            out, lse = tiles.attention_varlen(*x_dev, _offsets(lq, device), _offsets(lk, device), max(lq), max(lk),
                                              causal=causal, backend=name, return_lse=True, sinks=s_dev)
            (out.float() * do.to(device)).sum().backward()
            grads[kind] = [x.grad.cpu() for x in x_dev] + [s_dev.grad.cpu()]
            outs[kind] = (out.cpu(), lse.cpu())
            continue
        parts, lses = [], []
        for b in range(len(lq)):  # each sequence alone through the naive attention, summed into one loss
            o, l = attention_ref(xs[0][None, cq[b]:cq[b + 1]], xs[1][None, ck[b]:ck[b + 1]], xs[2][None, ck[b]:ck[b + 1]],
                                 causal, D ** -0.5, dtype=dt, sinks=s)
            parts.append(o[0])
            lses.append(l[0])
        out, lse = torch.cat(parts), torch.cat(lses, 1)
        (out * do.to(dt)).sum().backward()
        grads[kind], outs[kind] = [x.grad for x in xs] + [s.grad], (out, lse)
    out, lse = outs["tiles"]
    ref, ref_lse = outs["ref"]
    assert max_err(out, ref) <= 2 * max_err(outs["lp"][0], ref) + fl(ref)
    assert torch.allclose(lse.double(), ref_lse, rtol=1e-4, atol=1e-4)
    check_grads_rule(("q", "k", "v", "sinks"), grads["tiles"], grads["ref"], grads["lp"])


def test_attention_varlen_backward_replays_from_a_cuda_graph(backend):
    """A packed training step captured once and replayed with other offsets written in place (the same
    packed rows, other lengths): nothing on the path reads the offsets on the host, the backward's table of
    key blocks included, so each replay follows the new lengths; its gradients equal the eager step's."""
    name, device = backend
    if device == "cpu":
        pytest.skip("CUDA graphs need a CUDA device")
    H, Hkv, D = 4, 2, 64
    q, k, v = _packed([300, 212], [300, 212], H, Hkv, D, device, seed=27)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(28)).to(q.dtype).to(device)
    xs = [x.detach().requires_grad_() for x in (q, k, v)]
    cq, ck = _offsets([300, 212], device), _offsets([300, 212], device)

    def step():
        out = tiles.attention_varlen(*xs, cq, ck, 400, 400, causal=True, backend=name)
        return torch.autograd.grad(out, xs, do)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compiled and loaded before the capture
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        grads = step()
    for lengths in ([300, 212], [112, 400], [400, 112]):  # 512 packed rows, split two ways
        cq.copy_(_offsets(lengths, device))
        ck.copy_(_offsets(lengths, device))
        graph.replay()
        torch.cuda.synchronize()
        want = step()
        for n, a, b_ in zip("qkv", grads, want):
            assert torch.equal(a, b_), f"d{n} at lengths {lengths}"
