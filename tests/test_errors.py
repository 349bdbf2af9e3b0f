"""Bad input raises a ValueError/TypeError naming the argument, before any work (TESTING.md)."""
import math

import numpy as np
import pytest
import torch

import tiles

bf = torch.bfloat16


def qkv(B=1, S=16, H=2, Hkv=2, D=64, dtype=bf, Sk=None):
    Sk = S if Sk is None else Sk
    return (torch.randn(B, S, H, D).to(dtype), torch.randn(B, Sk, Hkv, D).to(dtype),
            torch.randn(B, Sk, Hkv, D).to(dtype))


def misaligned(shape, dtype=bf):
    return torch.randn(int(torch.tensor(shape).prod()) + 1).to(dtype)[1:].view(shape)


ATTN_CASES = [
    ("float32 q", lambda: (qkv(dtype=torch.float32), {}), TypeError, "q has dtype float32; supported: bfloat16, float16"),
    ("int q", lambda: ((torch.ones(1, 4, 2, 64, dtype=torch.int32),) + qkv()[1:], {}), TypeError, "q has dtype int32"),
    ("dtype mix", lambda: ((qkv()[0], qkv(dtype=torch.float16)[1], qkv()[2]), {}), TypeError, "q, k, v must share one dtype"),
    ("rank 3 q", lambda: ((qkv()[0][0],) + qkv()[1:], {}), ValueError, "q must have 4 dimensions"),
    ("rank 5 k", lambda: ((qkv()[0], qkv()[1][None], qkv()[2]), {}), ValueError, "k must have 4 dimensions"),
    ("head dim 80", lambda: (qkv(D=80), {}), ValueError, "head_dim is 80; supported head dims: (64, 128)"),
    ("head dim 32", lambda: (qkv(D=32), {}), ValueError, "supported head dims"),
    ("k head dim", lambda: ((qkv()[0], qkv(D=128)[1], qkv()[2]), {}), ValueError, "k and v must have q's head_dim"),
    ("heads not dividing", lambda: (qkv(H=4, Hkv=3), {}), ValueError, "kv heads (3) must divide the query heads (4)"),
    ("k v length", lambda: ((qkv()[0], qkv(Sk=10)[1], qkv(Sk=11)[2]), {}), ValueError, "same sequence length"),
    ("k v heads", lambda: ((qkv()[0], qkv(Hkv=1)[1], qkv(Hkv=2)[2]), {}), ValueError, "same number of heads"),
    ("batch", lambda: ((qkv(B=2)[0],) + qkv(B=1)[1:], {}), ValueError, "share the batch size"),
    ("inner stride", lambda: ((qkv()[0].transpose(2, 3).contiguous().transpose(2, 3),) + qkv()[1:], {}), ValueError,
     "q must have a contiguous last dimension"),
    ("misaligned ptr", lambda: ((misaligned((1, 16, 2, 64)),) + qkv()[1:], {}), ValueError, "16-byte aligned"),
    ("scale nan", lambda: (qkv(), {"scale": math.nan}), ValueError, "scale must be a finite number > 0, got nan"),
    ("scale inf", lambda: (qkv(), {"scale": math.inf}), ValueError, "scale must be a finite number > 0"),
    ("scale 0", lambda: (qkv(), {"scale": 0.0}), ValueError, "scale must be a finite number > 0, got 0.0"),
    ("scale neg", lambda: (qkv(), {"scale": -1.0}), ValueError, "scale must be a finite number > 0"),
    ("scale str", lambda: (qkv(), {"scale": "0.1"}), TypeError, "scale must be a float or None"),
    ("causal int", lambda: (qkv(), {"causal": 1}), TypeError, "causal must be a bool"),
    ("causal numpy", lambda: (qkv(), {"causal": np.True_}), TypeError, "causal must be a bool (True or False), got numpy.bool"),
    ("return_lse str", lambda: (qkv(), {"return_lse": "no"}), TypeError, "return_lse must be a bool"),
    ("scale past f32", lambda: (qkv(), {"scale": 1e300}), ValueError, "scale must lie within float32's normal range"),
    ("scale tensor", lambda: (qkv(), {"scale": torch.tensor(0.1)}), TypeError, "scale must be a float or None, got torch.Tensor"),
    ("misaligned advice", lambda: ((misaligned((1, 16, 2, 64)),) + qkv()[1:], {}), ValueError, ".clone() starts on an aligned"),
    ("dlpack byte order", lambda: ((np.zeros((1, 16, 2, 64), dtype=">f2"),) + qkv(dtype=torch.float16)[1:], {}), TypeError,
     "q (numpy.ndarray) cannot be viewed as a torch tensor through DLPack"),
    ("not tensor", lambda: (([[1.0]],) + qkv()[1:], {}), TypeError, "q must be a torch.Tensor"),
    ("backend name", lambda: (qkv(), {"backend": "tpu"}), ValueError, "backend='tpu' is not a tiles backend"),
    ("backend type", lambda: (qkv(), {"backend": 3}), TypeError, "backend must be a str or None"),
    ("meta device mix", lambda: ((qkv()[0], qkv()[1].to("meta"), qkv()[2]), {}), ValueError, "must be on one device"),
    ("cache_seqlens float", lambda: (qkv(B=2), {"cache_seqlens": torch.tensor([3.0, 4.0])}), TypeError,
     "cache_seqlens must be an int32 or int64 tensor, got torch.float32"),
    ("cache_seqlens list", lambda: (qkv(B=2), {"cache_seqlens": [3, 4]}), TypeError, "cache_seqlens must be a torch.Tensor"),
    ("cache_seqlens shape", lambda: (qkv(B=2), {"cache_seqlens": torch.tensor([[3, 4]])}), ValueError,
     "cache_seqlens must have one key count per sequence, shape (2,); got (1, 2)"),
    ("cache_seqlens past the cache", lambda: (qkv(B=2), {"cache_seqlens": torch.tensor([3, 17])}), ValueError,
     "cache_seqlens must lie in [0, 16] (the keys k holds a sequence); got values from 3 to 17"),
    ("cache_seqlens negative", lambda: (qkv(B=2), {"cache_seqlens": torch.tensor([-1, 4])}), ValueError,
     "must lie in [0, 16]"),
    ("cache_seqlens device", lambda: (qkv(B=2), {"cache_seqlens": torch.tensor([3, 4], device="meta")}), ValueError,
     "cache_seqlens is on meta, q on cpu"),
    ("block_table without counts", lambda: ((qkv(B=2)[0],) + qkv(B=3, S=256)[1:], {"block_table": torch.zeros(2, 1)}),
     ValueError, "block_table takes cache_seqlens with it"),
    ("block_table float", lambda: ((qkv(B=2)[0],) + qkv(B=3, S=256)[1:], {"cache_seqlens": torch.tensor([3, 4]),
                                                                        "block_table": torch.zeros(2, 1)}),
     TypeError, "block_table must be an int32 or int64 tensor, got torch.float32"),
    ("block_table shape", lambda: ((qkv(B=2)[0],) + qkv(B=3, S=256)[1:], {"cache_seqlens": torch.tensor([3, 4]),
                                                                        "block_table": torch.zeros(3, 1, dtype=torch.int32)}),
     ValueError, "block_table must have a row of page numbers per sequence, shape (2, pages a sequence); got (3, 1)"),
    ("block_table page size", lambda: ((qkv(B=2)[0],) + qkv(B=3, S=100)[1:], {"cache_seqlens": torch.tensor([3, 4]),
                                                                            "block_table": torch.zeros(2, 1, dtype=torch.int32)}),
     ValueError, "a paged cache's page size (k.shape[1]) must be a multiple of 256"),
    ("block_table page past the pool", lambda: ((qkv(B=2)[0],) + qkv(B=3, S=256)[1:], {
        "cache_seqlens": torch.tensor([300, 4]), "block_table": torch.tensor([[0, 3], [1, 9]], dtype=torch.int32)}),
     ValueError, "block_table[0, 1] = 3 is no page of the pool (k holds 3 pages)"),
    ("block_table counts past the pages", lambda: ((qkv(B=2)[0],) + qkv(B=3, S=256)[1:], {
        "cache_seqlens": torch.tensor([513, 4]), "block_table": torch.tensor([[0, 1], [2, 2]], dtype=torch.int32)}),
     ValueError, "cache_seqlens must lie in [0, 512]"),
    ("block_table pools differ", lambda: ((qkv(B=2)[0], qkv(B=3, S=256)[1], qkv(B=4, S=256)[2]), {
        "cache_seqlens": torch.tensor([3, 4]), "block_table": torch.zeros(2, 1, dtype=torch.int32)}),
     ValueError, "k and v must be pools of the same pages"),
    ("block_table empty pool", lambda: ((qkv(B=2)[0],) + qkv(B=0, S=256)[1:], {
        "cache_seqlens": torch.tensor([0, 0]), "block_table": torch.zeros(2, 1, dtype=torch.int32)}),
     ValueError, "k and v hold no page (k.shape[0] == 0)"),
    ("block_table past 2^31 keys", lambda: ((qkv(B=2)[0],) + qkv(B=1, S=256)[1:], {
        "cache_seqlens": torch.tensor([0, 0]), "block_table": torch.zeros(1, 1, dtype=torch.int32).expand(2, 2 ** 23)}),
     ValueError, "reach past 2^31 keys"),
    ("block_table 0-d", lambda: ((qkv(B=2)[0],) + qkv(B=1, S=256)[1:], {
        "cache_seqlens": torch.tensor([0, 0]), "block_table": torch.tensor(0, dtype=torch.int32)}),
     ValueError, "block_table must have a row of page numbers per sequence, shape (2, pages a sequence); got ()"),
    ("window_size int", lambda: (qkv(), {"window_size": 5}), TypeError, "window_size must be a pair of ints (left, right)"),
    ("window_size below -1", lambda: (qkv(), {"window_size": (-2, 0)}), ValueError, "key counts >= 0, or -1 for none"),
    ("window_size causal right", lambda: (qkv(), {"causal": True, "window_size": (4, 3)}), ValueError,
     "causal fixes the window's right edge at the diagonal"),
    ("sinks int", lambda: (qkv(), {"sinks": torch.zeros(2, dtype=torch.int32)}), TypeError,
     "sinks must be a float32, bfloat16 or float16 tensor, got torch.int32"),
    ("sinks shape", lambda: (qkv(), {"sinks": torch.zeros(3)}), ValueError,
     "sinks holds one logit a query head, shape (2,); got (3,)"),
    ("sinks device", lambda: (qkv(), {"sinks": torch.zeros(2, device="meta")}), ValueError, "sinks is on meta, q on cpu"),
    ("cache_seqlens with grads", lambda: ((qkv(B=2)[0].requires_grad_(),) + qkv(B=2)[1:],
                                          {"cache_seqlens": torch.tensor([3, 4])}), ValueError,
     "attention with cache_seqlens is forward only"),
]


@pytest.mark.parametrize("case", ATTN_CASES, ids=[c[0] for c in ATTN_CASES])
def test_attention_bad_input(case):
    _, make, exc, msg = case
    args, kw = make()
    with pytest.raises(exc) as e:
        tiles.attention(*args, **kw)
    assert msg in str(e.value)


def packed(lq=(3, 5), lk=(4, 6), H=2, Hkv=2, D=64):
    """q, k, v of packed sequences and their offsets (tiles.attention_varlen's first five arguments)."""
    q, k, v = (torch.randn(sum(n), h, D).to(bf) for n, h in ((lq, H), (lk, Hkv), (lk, Hkv)))
    cq = torch.tensor([0, lq[0], sum(lq)], dtype=torch.int32)
    ck = torch.tensor([0, lk[0], sum(lk)], dtype=torch.int32)
    return q, k, v, cq, ck


def _varlen(change):
    a = dict(zip(("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k"), packed()), max_seqlen_q=5, max_seqlen_k=6)
    a.update(change)
    return a


VARLEN_CASES = [
    ("4-D q", {"q": torch.randn(1, 8, 2, 64).to(bf)}, ValueError, "q must have 3 dimensions (total, heads, head_dim)"),
    ("offsets float", {"cu_seqlens_q": torch.tensor([0.0, 3.0, 8.0])}, TypeError,
     "cu_seqlens_q must be an int32 or int64 tensor, got torch.float32"),
    ("offsets list", {"cu_seqlens_k": [0, 4, 10]}, TypeError, "cu_seqlens_k must be a torch.Tensor"),
    ("offsets 2-D", {"cu_seqlens_q": torch.tensor([[0, 3, 8]], dtype=torch.int32)}, ValueError,
     "cu_seqlens_q must hold each sequence's first row and the end, shape (batch + 1,); got (1, 3)"),
    ("batches differ", {"cu_seqlens_k": torch.tensor([0, 10], dtype=torch.int32)}, ValueError,
     "cu_seqlens_k must hold each sequence's first row and the end, shape (3,), as cu_seqlens_q; got (2,)"),
    ("short end", {"cu_seqlens_q": torch.tensor([0, 3, 7], dtype=torch.int32)}, ValueError,
     "cu_seqlens_q must run from 0 to the packed rows (8); got 0 to 7"),
    ("decreasing", {"cu_seqlens_k": torch.tensor([0, 11, 10], dtype=torch.int32), "max_seqlen_k": 11}, ValueError,
     "cu_seqlens_k must not decrease (a sequence has -1 rows)"),
    ("longest too short", {"max_seqlen_q": 4}, ValueError, "max_seqlen_q is 4, but cu_seqlens_q holds a sequence of 5 rows"),
    ("longest float", {"max_seqlen_k": 6.0}, TypeError, "max_seqlen_k must be an int >= 0 (the longest sequence's length), got 6.0"),
    ("offsets device", {"cu_seqlens_q": torch.tensor([0, 3, 8], dtype=torch.int32, device="meta")}, ValueError,
     "cu_seqlens_q is on meta, q on cpu"),
    ("kv heads", {"k": torch.randn(10, 3, 64).to(bf), "v": torch.randn(10, 3, 64).to(bf)}, ValueError,
     "the kv heads (3) must divide the query heads (2)"),
]


def _pool(pages=3, page=256, Hkv=2, D=64):
    return torch.randn(pages, page, Hkv, D).to(bf), torch.randn(pages, page, Hkv, D).to(bf)


_TABLE = torch.tensor([[0, 1], [2, 0]], dtype=torch.int32)
VARLEN_CASES += [  # a paged cache (block_table): k and v a pool of pages, cu_seqlens_k the key counts' running sums
    ("paged: 3-D pool", {"block_table": _TABLE}, ValueError,
     "k must have 4 dimensions (pages, page_size, kv_heads, head_dim): a pool of pages, with block_table"),
    ("paged: page size", {"k": _pool(page=100)[0], "v": _pool(page=100)[1], "block_table": _TABLE}, ValueError,
     "a paged cache's page size (k.shape[1]) must be a multiple of 256"),
    ("paged: table rows", {"k": _pool()[0], "v": _pool()[1], "block_table": _TABLE[:1]}, ValueError,
     "block_table must have a row of page numbers per sequence, shape (2, pages a sequence); got (1, 2)"),
    ("paged: offsets start", {"k": _pool()[0], "v": _pool()[1], "block_table": _TABLE,
                              "cu_seqlens_k": torch.tensor([1, 4, 10], dtype=torch.int32)}, ValueError,
     "cu_seqlens_k must start at 0 (the running sums of the sequences' key counts); got 1"),
    ("paged: longest past the pages", {"k": _pool()[0], "v": _pool()[1], "block_table": _TABLE, "max_seqlen_k": 600,
                                       "cu_seqlens_k": torch.tensor([0, 4, 600], dtype=torch.int32)}, ValueError,
     "max_seqlen_k is 600, but a row of block_table holds 2 pages of 256 keys (512)"),
    ("paged: page outside the pool", {"k": _pool()[0], "v": _pool()[1],
                                      "block_table": torch.tensor([[0, 1], [3, 0]], dtype=torch.int32)}, ValueError,
     "block_table[1, 0] = 3 is no page of the pool (k holds 3 pages)"),
    ("sinks shape", {"sinks": torch.zeros(3)}, ValueError, "sinks holds one logit a query head, shape (2,); got (3,)"),
    ("sinks dtype", {"sinks": torch.zeros(2, dtype=torch.int32)}, TypeError,
     "sinks must be a float32, bfloat16 or float16 tensor, got torch.int32"),
    ("paged: grads", {"k": _pool()[0].requires_grad_(), "v": _pool()[1], "block_table": _TABLE}, ValueError,
     "attention_varlen with block_table is forward only"),
]


@pytest.mark.parametrize("case", VARLEN_CASES, ids=[c[0] for c in VARLEN_CASES])
def test_attention_varlen_bad_input(case):
    _, change, exc, msg = case
    with pytest.raises(exc) as e:
        tiles.attention_varlen(**_varlen(change))
    assert msg in str(e.value)


GEMM_CASES = [
    ("f32 inputs", lambda: (torch.randn(4, 4), torch.randn(4, 4)), {}, TypeError, "a has dtype float32"),
    ("mixed", lambda: (torch.randn(4, 4).to(bf), torch.randn(4, 4).half()), {}, TypeError, "a, b must share one dtype"),
    ("rank a", lambda: (torch.randn(4).to(bf), torch.randn(4, 4).to(bf)), {}, ValueError, "a must have 2 or more dimensions"),
    ("batched b", lambda: (torch.randn(2, 4, 4).to(bf), torch.randn(2, 4, 4).to(bf)), {}, ValueError,
     "b must have 2 dimensions (K, N)"),
    ("K mismatch", lambda: (torch.randn(4, 5).to(bf), torch.randn(4, 4).to(bf)), {}, ValueError,
     "a's K (5) must equal b's K (4)"),
    ("out dtype", lambda: (torch.randn(4, 4).to(bf), torch.randn(4, 4).to(bf)), {"out_dtype": torch.int8}, TypeError,
     "out_dtype is torch.int8"),
    ("out dtype type", lambda: (torch.randn(4, 4).to(bf), torch.randn(4, 4).to(bf)), {"out_dtype": "bf16"}, TypeError,
     "out_dtype must be a torch.dtype"),
    ("misaligned", lambda: (misaligned((4, 8)), torch.randn(8, 4).to(bf)), {}, ValueError, "a's data pointer"),
]


@pytest.mark.parametrize("case", GEMM_CASES, ids=[c[0] for c in GEMM_CASES])
def test_gemm_bad_input(case):
    _, make, kw, exc, msg = case
    with pytest.raises(exc) as e:
        tiles.gemm(*make(), **kw)
    assert msg in str(e.value)


NORM_CASES = [
    ("weight shape", lambda: (torch.randn(4, 8), torch.randn(7), torch.randn(8)), {}, ValueError,
     "weight must have shape (8,)"),
    ("eps", lambda: (torch.randn(4, 8), torch.randn(8), torch.randn(8)), {"eps": 0.0}, ValueError, "eps must be"),
    ("eps tensor", lambda: (torch.randn(4, 8), torch.randn(8), torch.randn(8)), {"eps": torch.tensor(1e-5)}, TypeError,
     "eps must be a float, got torch.Tensor"),
    ("eps under f32", lambda: (torch.randn(4, 8), torch.randn(8), torch.randn(8)), {"eps": 1e-300}, ValueError,
     "eps must lie within float32's normal range"),
    ("dtype", lambda: (torch.ones(4, 8, dtype=torch.int32), torch.randn(8), torch.randn(8)), {}, TypeError,
     "x has dtype int32"),
    ("too wide", lambda: (torch.randn(1, 20000), torch.randn(20000), torch.randn(20000)), {}, ValueError,
     "layernorm supports up to 16384"),
]


@pytest.mark.parametrize("case", NORM_CASES, ids=[c[0] for c in NORM_CASES])
def test_layernorm_bad_input(case):
    _, make, kw, exc, msg = case
    with pytest.raises(exc) as e:
        tiles.layernorm(*make(), **kw)
    assert msg in str(e.value)


ROTARY_CASES = [
    ("odd D", lambda: (torch.randn(1, 4, 2, 7), torch.randn(4, 3), torch.randn(4, 3)), ValueError, "must be even"),
    ("table shape", lambda: (torch.randn(1, 4, 2, 8), torch.randn(5, 4), torch.randn(4, 4)), ValueError,
     "cos must have shape (seq, head_dim/2) = (4, 4)"),
    ("rank", lambda: (torch.randn(4, 2, 8), torch.randn(4, 4), torch.randn(4, 4)), ValueError, "x must have 4 dimensions"),
]


@pytest.mark.parametrize("case", ROTARY_CASES, ids=[c[0] for c in ROTARY_CASES])
def test_rotary_bad_input(case):
    _, make, exc, msg = case
    with pytest.raises(exc) as e:
        tiles.rotary(*make())
    assert msg in str(e.value)


def test_index_overflow_is_refused_before_launch():
    from tiles import validate

    t = torch.empty((2**16, 2**16), dtype=bf, device="meta")  # spans 2^32 elements, takes no memory
    with pytest.raises(ValueError, match="32-bit index math"):
        validate.index_range("q", t, 2**31 - 1)


def test_numpy_scalars_are_numbers():
    """A numpy float is a number: the same result as the Python float it holds."""
    q, k, v = qkv()
    assert torch.equal(tiles.attention(q, k, v, scale=np.float32(0.125)), tiles.attention(q, k, v, scale=0.125))
    x, w, b = torch.randn(4, 8), torch.randn(8), torch.randn(8)
    assert torch.equal(tiles.layernorm(x, w, b, eps=np.float32(1e-5)), tiles.layernorm(x, w, b, eps=float(np.float32(1e-5))))


@pytest.mark.parametrize("name", ["hopper", "cdna"])
def test_gpu_backend_refuses_cpu_tensors(name):
    """CPU tensors asked onto a GPU backend: on a machine without it, that it is absent; on one with it,
    that it cannot run on tensors on the CPU. Either way before any launch."""
    from tiles import backends
    ok, _ = backends.get(name).available()
    want = f"backend='{name}' cannot run on tensors on device cpu" if ok else f"backend='{name}' is not available here"
    with pytest.raises(ValueError) as e:
        tiles.attention(*qkv(), backend=name)
    assert want in str(e.value)
