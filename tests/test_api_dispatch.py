"""Eager calls that need neither autograd nor torch.compile skip torch's custom-op dispatch (whose first
call imports torch._dynamo, seconds); everything else goes through the custom ops."""
import subprocess
import sys
import textwrap

import pytest
import torch

import tiles
from tiles import api

SCRIPT = textwrap.dedent("""
    import sys, time, torch, tiles
    a = torch.randn(16, 24, dtype=torch.bfloat16); b = torch.randn(24, 8, dtype=torch.bfloat16)
    q = torch.randn(1, 8, 2, 64, dtype=torch.bfloat16)
    t = time.perf_counter()
    c = tiles.gemm(a, b); o = tiles.attention(q, q, q, causal=True)
    print("direct", time.perf_counter() - t, "torch._dynamo" in sys.modules)
    a.requires_grad_(True)
    tiles.gemm(a, b).float().sum().backward()
    print("grad", a.grad is not None, "torch._dynamo" in sys.modules)
""")


def test_first_eager_call_does_not_import_dynamo():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "direct" and out[2] == "False", out  # no custom-op dispatch on the direct path
    assert out[3:] == ["grad", "True", "True"], out  # autograd goes through the custom op


def test_direct_only_where_the_custom_op_cannot_differ():
    x = torch.zeros(2, 2)
    assert api._direct(x, x)
    with torch.no_grad():  # an nn.Module's weights (nn.LayerNorm's) are Parameters
        assert api._direct(x, torch.nn.Parameter(torch.zeros(2)))
    assert not api._direct(x, torch.zeros(2, 2, requires_grad=True))
    with torch.no_grad():
        assert api._direct(torch.zeros(2, 2, requires_grad=True))

    class Sub(torch.Tensor):
        pass

    assert not api._direct(x, x.as_subclass(Sub))


def test_direct_and_custom_op_give_the_same_answer():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(20, 40, generator=g).to(torch.bfloat16)
    b = torch.randn(40, 12, generator=g).to(torch.bfloat16)
    direct = tiles.gemm(a, b, backend="interp")
    via_op = api._gemm(a, b, torch.bfloat16, "interp")
    assert torch.equal(direct, via_op)


def test_eager_backward_skips_the_custom_op(monkeypatch):
    """The attention backward under eager autograd runs its implementation directly, with the answer
    the custom op gives."""
    g = torch.Generator().manual_seed(1)
    q, k, v, do = (torch.randn(1, 24, 2, 64, generator=g).to(torch.bfloat16) for _ in range(4))
    xs = [x.clone().requires_grad_() for x in (q, k, v)]
    out, lse = tiles.attention(*xs, causal=True, backend="interp", return_lse=True)
    via_op = api._attention_bwd(do, q, k, v, out.detach(), lse.detach(), None, True, 64 ** -0.5, "interp")
    calls = []
    monkeypatch.setattr(api, "_attention_bwd", lambda *a: calls.append(a) or via_op)
    out.backward(do)
    assert calls == [], "eager autograd went through the custom op"
    for x, ref in zip(xs, via_op):
        assert torch.equal(x.grad, ref)


def _opcheck_cases():
    g = torch.Generator().manual_seed(5)
    r = lambda *s, dt=torch.bfloat16: torch.randn(*s, generator=g).to(dt)  # noqa: E731
    q, k, v = r(1, 40, 4, 64), r(1, 56, 2, 64), r(1, 56, 2, 64)
    out, lse = api._attention_fwd_impl(q, k, v, True, 0.125, "interp")
    # (two sequences of 20 queries: the op leaves the LSE's rows past a sequence's length unwritten, which
    # opcheck's comparison of two runs' outputs would read)
    cu_q, cu_k = torch.tensor([0, 20, 40], dtype=torch.int32), torch.tensor([0, 30, 56], dtype=torch.int32)
    vout, vlse = api._attention_varlen_fwd_impl(q, k, v, cu_q, cu_k, 20, True, 0.125, "interp")
    e4 = torch.float8_e4m3fn
    return {
        "attention_fwd": (api._attention_fwd, (q.requires_grad_(), k.requires_grad_(), v, True, 0.125, "interp")),
        "attention_bwd": (api._attention_bwd, (r(1, 40, 4, 64), q.detach(), k.detach(), v, out, lse, None, True, 0.125,
                                               "interp")),
        "gemm": (api._gemm, (r(24, 40).requires_grad_(), r(40, 16).requires_grad_(), torch.bfloat16, "interp")),
        "gemm_fp8": (api._gemm_fp8, (r(24, 256, dt=torch.float32).to(e4), r(16, 256, dt=torch.float32).to(e4),
                                     torch.rand(24, 2, generator=g), torch.rand(1, 2, generator=g), torch.bfloat16,
                                     "interp")),
        "layernorm": (api._layernorm, (r(6, 40, dt=torch.float32).requires_grad_(), r(40, dt=torch.float32).requires_grad_(),
                                       r(40, dt=torch.float32).requires_grad_(), 1e-5, "interp")),
        "rotary": (api._rotary, (r(1, 12, 2, 16, dt=torch.float32).requires_grad_(), r(12, 8, dt=torch.float32),
                                 r(12, 8, dt=torch.float32).requires_grad_(), "interp")),
        # a (B, H, S, D) tensor's transposed view, RoPE's usual layout: the fake output is contiguous too
        "rotary_bhsd": (api._rotary, (r(1, 2, 12, 16, dt=torch.float32).transpose(1, 2), r(12, 8, dt=torch.float32),
                                      r(12, 8, dt=torch.float32), "interp")),
        "attention_fwd_bhsd": (api._attention_fwd, (r(1, 4, 40, 64).transpose(1, 2), k, v, True, 0.125, "interp")),
        "attention_fwd_ragged": (api._attention_fwd, (r(2, 3, 4, 64), r(2, 56, 2, 64), r(2, 56, 2, 64), True, 0.125,
                                                      "interp", torch.tensor([56, 9], dtype=torch.int32))),
        # packed sequences (tiles.attention_varlen): 40 query rows and 56 keys in two sequences each
        "attention_varlen_fwd": (api._attention_varlen_fwd, (q.detach().clone().requires_grad_(), k.detach().clone(),
                                                             v.detach().clone().requires_grad_(), cu_q, cu_k, 20, True,
                                                             0.125, "interp")),
        "attention_varlen_paged_fwd": (api._attention_varlen_paged_fwd, (
            q.detach(), r(3, 256, 2, 64), r(3, 256, 2, 64), cu_q, torch.tensor([300, 26], dtype=torch.int32),
            torch.tensor([[0, 1], [2, 0]], dtype=torch.int32), 20, True, 0.125, "interp")),
        "attention_varlen_bwd": (api._attention_varlen_bwd, (r(1, 40, 4, 64), q.detach(), k.detach(), v.detach(), vout,
                                                             vlse, torch.rand(2, 4, 20, generator=g), cu_q, cu_k, True,
                                                             0.125, "interp")),
    }


def test_custom_ops_pass_torch_opcheck():
    """torch.library.opcheck on every custom op: its schema, its fake (meta) implementation against the
    real one, its autograd registration, and that it traces under torch.compile's dispatch the same way."""
    every = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    for name, (op, args) in _opcheck_cases().items():
        # test_schema compares the inputs before and after with arithmetic torch's CPU lacks for 8-bit floats
        utils = every[1:] if name == "gemm_fp8" else every
        try:
            torch.library.opcheck(op, args, test_utils=utils)
        except Exception as e:  # noqa: BLE001  (name the op in the failure)
            raise AssertionError(f"tiles::{name}: {e}") from e


def test_decode_runs_grouped_rows_without_the_mask(monkeypatch):
    """One query row: causal is dropped (the row sees every key), and under GQA the query heads of a key /
    value head become the rows of one head, a view of q (the kernel then reads each head's keys once)."""
    seen = []
    impl = api._attention_fwd_impl

    def spy(q, k, v, causal, scale, backend, lens=None, pages=None, left=-1, right=-1):
        seen.append((tuple(q.shape), causal, q.data_ptr()))
        return impl(q, k, v, causal, scale, backend, lens, pages, left, right)

    monkeypatch.setattr(api, "_attention_fwd_impl", spy)
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 1, 8, 64, generator=g).to(torch.bfloat16)
    k, v = (torch.randn(2, 40, 2, 64, generator=g).to(torch.bfloat16) for _ in range(2))
    out, lse = tiles.attention(q, k, v, causal=True, backend="interp", return_lse=True)
    assert seen == [((2, 4, 2, 64), False, q.data_ptr())]  # (B, H / Hkv, Hkv, D), no copy
    assert out.shape == q.shape and lse.shape == (2, 8, 1)
    # the same answer as the heads one by one: row j of kv head h is query head h * 4 + j
    for h in range(8):
        o1, l1 = tiles.attention(q[:, :, h:h + 1], k[:, :, h // 4:h // 4 + 1], v[:, :, h // 4:h // 4 + 1],
                                 backend="interp", return_lse=True)
        assert torch.equal(out[:, :, h:h + 1], o1) and torch.equal(lse[:, h:h + 1], l1)
    seen.clear()
    tiles.attention(q[:, :, :2], k, v, causal=True, backend="interp")  # MHA: no grouping, still no mask
    tiles.attention(torch.cat([q, q], 1), k, v, causal=True, backend="interp")  # causal, 40 keys: as given
    assert [(s, c) for s, c, _ in seen] == [((2, 1, 2, 64), False), ((2, 2, 8, 64), True)]


def test_few_rows_group_the_keys_every_row_sees(monkeypatch):
    """A few query rows under GQA (speculative decoding): the rows grouped as (row, head of the group);
    causal, the keys every row sees in that grouped call, the last Sq - 1 keys in a causal call on the rows
    as given, merged by the LSE. The answer is the call as given's, up to the merge's rounding."""
    seen = []
    impl = api._attention_fwd_impl

    def spy(q, k, v, causal, scale, backend, lens=None, pages=None, left=-1, right=-1):
        seen.append((tuple(q.shape), k.shape[1], causal))
        return impl(q, k, v, causal, scale, backend, lens, pages, left, right)

    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 3, 8, 64, generator=g).to(torch.bfloat16)
    k, v = (torch.randn(2, 40, 2, 64, generator=g).to(torch.bfloat16) for _ in range(2))
    for causal in (True, False):
        want, want_lse = impl(q, k, v, causal, 0.125, "interp")
        monkeypatch.setattr(api, "_attention_fwd_impl", spy)
        monkeypatch.setattr(api, "GROUPED_CAUSAL_KEYS", 38)
        seen.clear()
        out, lse = tiles.attention(q, k, v, causal=causal, backend="interp", return_lse=True)
        monkeypatch.undo()
        calls = [((2, 12, 2, 64), 38, False), ((2, 3, 8, 64), 2, True)] if causal else [((2, 12, 2, 64), 40, False)]
        assert seen == calls
        assert out.shape == q.shape and lse.shape == (2, 8, 3)
        err = (out.float() - want.float()).abs().max().item()
        assert err <= 2 ** -7 * want.float().abs().max().item(), err  # a bf16 rounding or two
        torch.testing.assert_close(lse, want_lse, rtol=1e-5, atol=1e-5)
        # the first row sees no key of the second call: its output is the grouped call's, unmerged
        assert not causal or torch.equal(out[:, 0], tiles.attention(q[:, :1], k[:, :38], v[:, :38], backend="interp")[:, 0])

    monkeypatch.setattr(api, "_attention_fwd_impl", spy)
    seen.clear()
    monkeypatch.setattr(api, "GROUPED_CAUSAL_KEYS", 39)  # one key short of the threshold: as given
    tiles.attention(q, k, v, causal=True, backend="interp")
    monkeypatch.setattr(api, "GROUPED_CAUSAL_KEYS", 1)
    tiles.attention(q, k[:, :2], v[:, :2], causal=True, backend="interp")  # rows that see no key: as given
    q65 = torch.randn(1, api.GROUPED_ROWS + 1, 8, 64, generator=g).to(torch.bfloat16)
    tiles.attention(q65, k[:1], v[:1], backend="interp")  # more rows than GROUPED_ROWS: as given
    assert seen == [((2, 3, 8, 64), 40, True), ((2, 3, 8, 64), 2, True), ((1, 65, 8, 64), 40, False)]


def test_few_rows_trace_under_torch_compile(monkeypatch):
    """The grouped rows, the second causal call and the merge are torch operations and custom ops: they
    trace into one graph (fullgraph), give the eager answer, and differentiate."""
    monkeypatch.setattr(api, "GROUPED_CAUSAL_KEYS", 8)
    g = torch.Generator().manual_seed(9)
    q = torch.randn(1, 3, 4, 64, generator=g).to(torch.bfloat16).requires_grad_()
    k, v = (torch.randn(1, 30, 2, 64, generator=g).to(torch.bfloat16) for _ in range(2))

    def f(q):
        out, lse = tiles.attention(q, k, v, causal=True, backend="interp", return_lse=True)
        return out.float().sum() + lse.sum()

    got = torch.compile(f, backend="aot_eager", fullgraph=True)(q)
    assert torch.allclose(got, f(q))
    got.backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()


def test_ragged_cache_takes_the_paths_its_counts_allow(monkeypatch):
    """cache_seqlens: decode and non-causal rows run grouped with the counts (one view / copy of q, the
    counts handed to the kernel as they are); causal rows run as given (the keys every row sees end at
    each sequence's own count). Each sequence's answer is the call on its own keys."""
    seen = []
    impl = api._attention_fwd_impl

    def spy(q, k, v, causal, scale, backend, lens=None, pages=None, left=-1, right=-1):
        seen.append((tuple(q.shape), causal, None if lens is None else lens.tolist()))
        return impl(q, k, v, causal, scale, backend, lens, pages, left, right)

    monkeypatch.setattr(api, "_attention_fwd_impl", spy)
    monkeypatch.setattr(api, "GROUPED_CAUSAL_KEYS", 1)
    g = torch.Generator().manual_seed(11)
    k, v = (torch.randn(3, 50, 2, 64, generator=g).to(torch.bfloat16) for _ in range(2))
    lens = torch.tensor([50, 7, 0], dtype=torch.int64)  # int64 and on the CPU: taken as int32
    for Sq, causal, call in ((1, True, ((3, 4, 2, 64), False)), (3, False, ((3, 12, 2, 64), False)),
                             (3, True, ((3, 3, 8, 64), True))):
        q = torch.randn(3, Sq, 8, 64, generator=g).to(torch.bfloat16)
        seen.clear()
        out, lse = tiles.attention(q, k, v, causal=causal, backend="interp", return_lse=True, cache_seqlens=lens)
        assert seen == [call + ([50, 7, 0],)]
        for b, n in enumerate(lens.tolist()):
            o1, l1 = impl(q[b:b + 1], k[b:b + 1, :n], v[b:b + 1, :n], causal and Sq > 1, 0.125, "interp")
            assert torch.equal(out[b:b + 1], o1) and torch.equal(lse[b:b + 1], l1), (Sq, causal, b)


def test_ragged_cache_traces_under_torch_compile():
    """cache_seqlens goes through the custom op: one graph (fullgraph), the eager answer, and the counts
    read at run time (a second call with other counts reuses the compiled graph and follows them)."""
    g = torch.Generator().manual_seed(12)
    q = torch.randn(2, 1, 4, 64, generator=g).to(torch.bfloat16)
    k, v = (torch.randn(2, 30, 2, 64, generator=g).to(torch.bfloat16) for _ in range(2))
    f = lambda lens: tiles.attention(q, k, v, causal=True, backend="interp", cache_seqlens=lens)  # noqa: E731
    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    for counts in ([30, 4], [1, 17]):
        lens = torch.tensor(counts, dtype=torch.int32)
        assert torch.equal(compiled(lens), f(lens))


def test_ragged_cache_refuses_what_it_cannot_do():
    """The custom op is public: called with counts on inputs that require grad, its backward raises
    instead of differentiating over every row of the cache. Under torch.compile (no host check) an int64
    count past int32 is clamped to the cache, not wrapped."""
    g = torch.Generator().manual_seed(13)
    q = torch.randn(2, 1, 4, 64, generator=g).to(torch.bfloat16).requires_grad_()
    k, v = (torch.randn(2, 30, 2, 64, generator=g).to(torch.bfloat16) for _ in range(2))
    out, _ = torch.ops.tiles.attention_fwd(q, k, v, False, 0.125, "interp", torch.tensor([30, 4], dtype=torch.int32))
    with pytest.raises(ValueError, match="with cache_seqlens is forward only"):
        out.float().sum().backward()
    q = q.detach()
    f = lambda lens: tiles.attention(q, k, v, backend="interp", cache_seqlens=lens)  # noqa: E731
    got = torch.compile(f, backend="aot_eager", fullgraph=True)(torch.tensor([2 ** 32 + 5, -1]))
    assert torch.equal(got, f(torch.tensor([30, 0])))


def test_paged_cache_is_the_contiguous_cache_it_holds(monkeypatch):
    """block_table: decode rows grouped (a view of q) with the counts and the table handed to the kernel;
    each answer bitwise the call on the contiguous cache the pages hold, and the same under torch.compile
    (fullgraph). Entries past a sequence's count may name no page (here -1)."""
    seen = []
    impl = api._attention_fwd_impl

    def spy(q, k, v, causal, scale, backend, lens=None, pages=None, left=-1, right=-1):
        seen.append((tuple(q.shape), tuple(k.shape), None if pages is None else pages.tolist()))
        return impl(q, k, v, causal, scale, backend, lens, pages, left, right)

    g = torch.Generator().manual_seed(14)
    q = torch.randn(2, 1, 8, 64, generator=g).to(torch.bfloat16)
    cache = [torch.randn(2, 512, 2, 64, generator=g).to(torch.bfloat16) for _ in range(2)]
    lens = torch.tensor([300, 256], dtype=torch.int32)
    table = torch.tensor([[3, 0], [1, -1]], dtype=torch.int32)
    pools = [torch.zeros(4, 256, 2, 64, dtype=torch.bfloat16) for _ in range(2)]
    for pool, c in zip(pools, cache):
        pool[3], pool[0], pool[1] = c[0, :256], c[0, 256:], c[1, :256]
    want = tiles.attention(q, *cache, causal=True, backend="interp", cache_seqlens=lens)
    monkeypatch.setattr(api, "_attention_fwd_impl", spy)
    got = tiles.attention(q, *pools, causal=True, backend="interp", cache_seqlens=lens, block_table=table)
    assert seen == [((2, 4, 2, 64), (4, 256, 2, 64), [[3, 0], [1, -1]])] and torch.equal(got, want)
    monkeypatch.undo()
    f = lambda t: tiles.attention(q, *pools, backend="interp", cache_seqlens=lens, block_table=t)  # noqa: E731
    assert torch.equal(torch.compile(f, backend="aot_eager", fullgraph=True)(table), want)


def test_a_decode_window_is_a_slice_of_the_cache(monkeypatch):
    """One query row a sequence under a left window sees the last left + 1 keys: the api hands the kernel
    that slice of the cache, unmasked, and keeps the grouped rows; an edge that excludes no key is none."""
    seen = []
    impl = api._attention_fwd_impl

    def spy(q, k, v, causal, scale, backend, lens=None, pages=None, left=-1, right=-1):
        seen.append((tuple(q.shape), k.shape[1], causal, left, right))
        return impl(q, k, v, causal, scale, backend, lens, pages, left, right)

    monkeypatch.setattr(api, "_attention_fwd_impl", spy)
    g = torch.Generator().manual_seed(15)
    q = torch.randn(2, 1, 8, 64, generator=g).to(torch.bfloat16)
    k, v = (torch.randn(2, 300, 2, 64, generator=g).to(torch.bfloat16) for _ in range(2))
    out = tiles.attention(q, k, v, causal=True, backend="interp", window_size=(99, 0))
    tiles.attention(q, k, v, causal=True, backend="interp", window_size=(2 ** 31 - 1, -1))
    assert seen == [((2, 4, 2, 64), 100, False, -1, -1), ((2, 4, 2, 64), 300, False, -1, -1)]
    assert torch.equal(out, tiles.attention(q, k[:, 200:], v[:, 200:], backend="interp"))


def test_packed_training_step_traces_under_torch_compile():
    """tiles.attention_varlen's forward and backward as one torch.compile graph (its custom ops and their
    fake implementations): the same gradients as eager, bitwise."""
    g = torch.Generator().manual_seed(8)
    lq, lk = [30, 10, 57], [40, 0, 57]
    cq = torch.tensor([0, 30, 40, 97], dtype=torch.int32)
    ck = torch.tensor([0, 40, 40, 97], dtype=torch.int32)
    q = torch.randn(sum(lq), 4, 64, generator=g).to(torch.bfloat16)
    k, v = (torch.randn(sum(lk), 2, 64, generator=g).to(torch.bfloat16) for _ in range(2))

    def step(q, k, v):
        out, lse = tiles.attention_varlen(q, k, v, cq, ck, 57, 57, causal=True, backend="interp", return_lse=True)
        return out.float().square().sum() + torch.where(torch.isfinite(lse), lse, 0).sum()

    grads = []
    for fn in (step, torch.compile(step, backend="aot_eager", fullgraph=True)):
        xs = [x.clone().requires_grad_() for x in (q, k, v)]
        fn(*xs).backward()
        grads.append([x.grad for x in xs])
    for n, a, b in zip("qkv", *grads):
        assert torch.equal(a, b), f"d{n}"
