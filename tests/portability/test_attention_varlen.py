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
from reference import check_attention_fwd


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
