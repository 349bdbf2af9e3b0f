"""Option split_tail of the warp-specialized attention lowering (tiles/split.h, core/split.py).

On the CPU: the launcher's plan, the lowering's refusals, and the split forward compiles through
NVRTC with its merge kernel beside it, without spills, the wgmmas not serialized. On an sm_90 GPU:
whole tiles bitwise as without the option, split tiles by the TESTING.md rule against float64
(short shapes, where every program is split), causal parts that see no key, GQA, tails, both head
dims and dtypes, and bitwise repeatable."""
from __future__ import annotations

import math

import pytest
import torch

import needs  # tests/hopper is on sys.path
from tiles.core import split
from tiles.core.lowering import LoweringError


def test_plan_standard_shapes():
    # 2048 query tiles on 132 SMs (every H = 16 standard shape): 15 whole waves, 68 tiles in 3 parts
    assert split.plan(2048, 132, 32) == (1980, 3)
    # whole waves, one trip a program, or a forced single part: nothing split
    assert split.plan(264, 132, 32) == (264, 1)
    assert split.plan(2000, 132, 1) == (2000, 1)
    assert split.plan(2048, 132, 32, parts=1) == (2048, 1)
    # a short grid (fewer programs than SMs) is all tail: flash-decoding's split of the keys
    assert split.plan(32, 132, 8) == (0, 4)
    # ... and one shorter than the parts the last waves take (8) fills the SMs once: decode's grouped
    # heads (8 programs over 32k keys) in 16 parts, MQA's one program in as many as fill them
    assert split.plan(8, 132, 256) == (0, 16)
    assert split.plan(8, 132, 256, max_parts=8) == (0, 8)
    whole, r = split.plan(1, 132, 256)
    assert whole == 0 and 120 <= r <= 132
    assert split.plan(1, 132, 5) == (0, 5)  # at most one part a trip
    assert split.plan(2048, 132, 32, parts=5) == (1980, 5)
    assert split.plan(2048, 132, 3, parts=5) == (1980, 3)  # at most one part a trip
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="positive int"):
            split.plan(2048, 132, 32, parts=bad)


def test_schedule_splits_long_non_causal_forwards():
    from tiles.backends.hopper.attention_launch import SPLIT_TAIL_KEYS
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W

    def opts(D, Sk, causal=False):
        q = torch.empty(1, 2048, 1, D, dtype=torch.bfloat16)
        k = torch.empty(1, Sk, 1, D, dtype=torch.bfloat16)
        return W.schedule("attention_fwd", D, (q, k, k, q, torch.empty(1, 1, 2048)), causal) or {}
    for D, keys in SPLIT_TAIL_KEYS.items():
        assert opts(D, keys).get("split_tail") is True
        assert "split_tail" not in opts(D, keys - 128)
        assert "split_tail" not in opts(D, keys, causal=True)  # the pairs' walk is not cut
    assert "split_tail" not in (W.schedule("attention_bwd_dq", 128, (), False) or {})


def test_short_grids_are_cut_at_any_key_count(monkeypatch):
    """The launcher's choice for a grid shorter than one wave (decode), on the CPU with the H200's 132 SMs:
    the split where the plan cuts, the TMA store giving way at D = 64, the heavy-first walk for causal;
    nothing where schedule() already split, the grid is a wave, or the loop is too short to cut."""
    from tiles.backends.hopper import runtime
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.core import ir
    from tiles.kernels import attention_fwd
    monkeypatch.setattr(runtime, "num_sms", lambda: 132)

    def choice(B, Sq, H, Hkv, Sk, D, causal):
        q, k = torch.empty(B, Sq, H, D, dtype=torch.bfloat16), torch.empty(B, Sk, Hkv, D, dtype=torch.bfloat16)
        args = (q, k, k, torch.empty_like(q), torch.empty(B, H, Sq), D ** -0.5)
        kw = dict(causal=causal, D=D, **W.config("attention_fwd", D=D, causal=causal, Sq=Sq))
        opts = W.schedule("attention_fwd", D, args[:5], causal)
        bound, trace = attention_fwd.bind(*args, **kw), attention_fwd.trace(*args, **kw)
        tensors = {p.name: bound.arguments[p.name] for p in trace.params}
        env = W._env(trace, tensors, bound)
        grid = tuple(int(ir.evaluate(g, env)) for g in trace.grid)
        got = W._short_grid(trace, W._lowering(trace, opts), opts, bound, env, grid)
        return opts, (None if got is None else (got[1], got[0].notes["split"] is not None))

    opts, got = choice(1, 1, 16, 16, 3000, 64, False)  # MHA decode at D = 64: 16 programs of 24 trips
    assert opts.get("tma_store") and "split_tail" not in opts
    assert got[1] and got[0]["split_tail"] is True and "tma_store" not in got[0]
    opts, got = choice(1, 8, 32, 8, 2048, 128, True)  # 8 rows, causal: 32 programs, walked heavy-first
    assert got[1] and got[0]["window"] is False and got[0]["split_tail"] is True
    assert choice(1, 4, 8, 8, 32768, 128, False)[1] is None  # schedule() splits it already (32k keys)
    assert choice(4, 8, 32, 8, 16384, 128, True)[1] is None  # 128 programs: the plan leaves them whole
    assert choice(8, 1024, 16, 16, 1024, 128, False)[1] is None  # 1024 programs, a full grid
    assert choice(1, 1, 8, 8, 128, 128, False)[1] is None  # one key block: nothing to cut
    assert choice(1, 1, 8, 8, 1920, 128, False)[1] is None  # 15 blocks: the merge would cost what it saves
    assert choice(1, 1, 8, 8, 2048, 128, False)[1] is not None


def _lower(D=128, causal=False, options=None, kernel="fwd"):
    from test_attention_lower import _lower as lower
    return lower(D=D, causal=causal, options=options, kernel=kernel, launched=True)


def test_refusals():
    with pytest.raises(LoweringError, match="declares no merge"):
        _lower(kernel="dq", options={"split_tail": True})
    with pytest.raises(LoweringError, match="through TMA"):
        _lower(D=64, options={"split_tail": True, "tma_store": True})
    with pytest.raises(LoweringError, match="plain persistent walk"):
        _lower(options={"split_tail": True, "persistent": False})
    with pytest.raises(LoweringError, match="window=False"):
        _lower(causal=True, options={"split_tail": True})


@pytest.mark.parametrize("D,causal", [(128, False), (128, True), (64, False)])
def test_split_forward_compiles(D, causal, tmp_path):
    runtime = needs.nvrtc()
    from test_compile import assert_no_spills
    from sass import disassemble
    opts = {"peel": True} if D == 128 else {}
    if causal:
        opts["window"] = False  # the heavy-first walk: the pairs' walk has no units to cut
    low = _lower(D=D, causal=causal, options={**opts, "split_tail": True})
    assert low.notes["split"]["merge"] == low.entry + "_merge"
    assert "split_range(kb_begin, kb_end, part, split_parts)" in low.source
    assert "merge_parts<%d>" % D in low.source
    c = runtime.compile_cuda(low.source, name=low.entry + ".cu", cache=False)
    assert_no_spills(c, low.entry, tmp_path)
    assert_no_spills(c, low.notes["split"]["merge"], tmp_path)
    sass = disassemble(c.cubin, tmp_path)
    assert "HGMMA" in sass and "USETMAXREG" in sass
    # without the option: no workspace, no merge kernel
    plain = _lower(D=D, causal=causal, options=opts or None)
    assert "split_ws" not in plain.source and low.entry not in plain.source


# ---------------------------------------------------------------------------------------- GPU

def _run(q, k, v, causal, split_tail):
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.kernels import attention_fwd
    B, Sq, H, D = q.shape
    o = torch.empty_like(q)
    lse = torch.empty(B, H, Sq, device=q.device)
    opts = dict(W.schedule("attention_fwd", D, (q, k, v, o, lse), causal) or {})
    opts.pop("tma_store", None)
    opts.pop("ring_store", None)  # the split alone (test_ring_store.py takes the two together)
    opts["split_tail"] = split_tail
    if causal:
        opts["window"] = False
    cfg = W.config("attention_fwd", D=D, causal=causal, Sq=Sq)
    go = W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=causal, D=D, options=opts, **cfg)
    go()
    torch.cuda.synchronize()
    return o, lse, go


def _inputs(B, Sq, Sk, H, Hkv, D, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(B, Sq, H, D, device="cuda", generator=g).to(dtype),
            torch.randn(B, Sk, Hkv, D, device="cuda", generator=g).to(dtype),
            torch.randn(B, Sk, Hkv, D, device="cuda", generator=g).to(dtype))


# short grids (fewer programs than SMs): every program is split, so the whole output comes through the
# merge. (B, Sq, Sk, H, Hkv, D, causal, parts)
SHORT = [
    (1, 1000, 1000, 4, 2, 128, False, True),   # query tail, GQA, the plan's parts
    (1, 300, 1333, 2, 1, 128, False, 5),       # Sk != Sq, a key tail, MQA
    (2, 700, 700, 4, 2, 128, True, 3),         # causal: the first blocks' early parts see no key
    (1, 190, 450, 2, 2, 128, True, 4),         # causal bottom-right, rows with no key at all
    (1, 1000, 1000, 4, 4, 64, False, True),    # 192-row tiles in three warpgroups
    (2, 500, 640, 3, 1, 64, True, 2),
]


@pytest.mark.parametrize("shape", SHORT, ids=lambda s: "x".join(map(str, s)))
def test_split_short_grids_against_float64(shape):
    needs.hopper_gpu()
    import sys
    import pathlib
    sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "portability"))
    from reference import check_attention_fwd
    B, Sq, Sk, H, Hkv, D, causal, parts = shape
    dtype = torch.float16 if D == 64 and causal else torch.bfloat16
    q, k, v = _inputs(B, Sq, Sk, H, Hkv, D, dtype, sum(shape[:6]))
    o, lse, go = _run(q, k, v, causal, parts)
    whole, r = go.split
    assert whole == 0 and r > 1, go.split  # every program in parts
    check_attention_fwd(o, lse, q, k, v, causal, D ** -0.5)
    o2, lse2, _ = _run(q, k, v, causal, parts)
    assert torch.equal(o, o2) and torch.equal(lse, lse2), "the split forward is not bitwise repeatable"


def test_split_standard_shape_whole_tiles_bitwise():
    needs.hopper_gpu()
    B, S, H, D = 4, 4096, 16, 128
    q, k, v = _inputs(B, S, S, H, H, D, torch.bfloat16, 7)
    o1, l1, g1 = _run(q, k, v, False, False)
    o2, l2, g2 = _run(q, k, v, False, True)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    whole, parts = g2.split
    assert whole == 2048 // sms * sms and parts > 1, g2.split
    # the walk's tile order (non-causal: program 0 fastest, in reverse): which rows the split tiles hold
    grid0 = S // 128
    t = torch.arange(whole, 2048)
    pid0, pid1, pid2 = grid0 - 1 - t % grid0, t // grid0 % H, t // grid0 // H
    mask = torch.zeros(B, S, H, dtype=torch.bool)
    for a, b, c in zip(pid0.tolist(), pid1.tolist(), pid2.tolist()):
        mask[c, a * 128:(a + 1) * 128, b] = True
    mask = mask.cuda()
    assert torch.equal(o1[~mask], o2[~mask]), "a whole tile differs from the unsplit kernel's"
    lmask = mask.permute(0, 2, 1)
    assert torch.equal(l1[~lmask], l2[~lmask])
    # split tiles: the same softmax, with P rounded to bf16 against each part's own maximum
    d = (o1[mask].float() - o2[mask].float()).abs()
    assert d.max().item() < 4e-3 and d.mean().item() < 1e-4, (d.max().item(), d.mean().item())
    assert (l1[lmask] - l2[lmask]).abs().max().item() < 1e-4
    assert not math.isnan(o2.float().sum().item())


@pytest.mark.parametrize("H,Hkv,Sk,D", [(8, 1, 5000, 128), (32, 8, 33000, 128), (16, 16, 3000, 64), (8, 2, 2100, 128)],
                         ids=["mqa", "gqa4", "mha-d64", "gqa4-short"])
def test_decode_through_the_api_fills_the_sms(H, Hkv, Sk, D, monkeypatch):
    """tiles.attention at decode (one query row a sequence, causal as users pass it): the grouped heads'
    few programs are cut along the keys until they fill the SMs once, on a persistent grid as long as
    its units (at any key count, and where D = 64's short sequences would store O through TMA), and the
    answer holds against float64."""
    needs.hopper_gpu()
    import sys
    import pathlib
    sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "portability"))
    from reference import check_attention_fwd
    import tiles
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    gos = []
    real = W._prepare

    def spy(*a, **kw):
        go = real(*a, **kw)
        gos.append(go)
        return go
    monkeypatch.setattr(W, "_prepare", spy)
    q, k, v = _inputs(1, 1, Sk, H, Hkv, D, torch.bfloat16, Sk)
    o, lse = tiles.attention(q, k, v, causal=True, return_lse=True)
    torch.cuda.synchronize()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    programs, trips = (H // Hkv + 191) // 192 * Hkv if D == 64 else Hkv, -(-Sk // 128)
    (go,) = gos
    whole, parts = go.split
    assert (whole, parts) == split.plan(programs, sms, trips) and parts > 1, go.split
    assert go.grid == (min(programs * parts, sms), 1, 1), go.grid
    check_attention_fwd(o, lse, q, k, v, False, D ** -0.5)


def test_split_forward_in_a_cuda_graph():
    # the workspace comes from torch's allocator at each launch: under capture, the graph's pool, and
    # what is allocated after it in the capture may reuse it (stream order keeps that safe)
    needs.hopper_gpu()
    q, k, v = _inputs(1, 1000, 1000, 4, 2, 128, torch.bfloat16, 3)
    o, lse, go = _run(q, k, v, False, 3)
    assert go.split == (0, 3)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        go()
        doubled = o.float() * 2
    for seed in (11, 12):
        fresh = _inputs(1, 1000, 1000, 4, 2, 128, torch.bfloat16, seed)
        for t, x in zip((q, k, v), fresh):
            t.copy_(x)
        g.replay()
        torch.cuda.synchronize()
        want_o, want_lse, _ = _run(*fresh, False, 3)
        assert torch.equal(o, want_o) and torch.equal(lse, want_lse)
        assert torch.equal(doubled, want_o.float() * 2)


@pytest.mark.parametrize("Sq", [1, 4], ids=["decode", "4rows"])
def test_decode_through_the_api_in_a_cuda_graph(Sq, monkeypatch):
    """Decode as a serving loop runs it, captured in a CUDA graph: one row, or four causal rows (the grouped
    call cut along the keys, the second call on the last three keys, the api's merge), replayed on fresh
    inputs copied into the captured ones. Each replay is bitwise the eager call's answer."""
    needs.hopper_gpu()
    import tiles
    from tiles import api

    monkeypatch.setattr(api, "GROUPED_CAUSAL_KEYS", 1024)
    q, k, v = _inputs(2, Sq, 3000, 32, 8, 128, torch.bfloat16, 21)
    tiles.attention(q, k, v, causal=True)  # compiled and loaded before the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = tiles.attention(q, k, v, causal=True)
    for seed in (22, 23):
        fresh = _inputs(2, Sq, 3000, 32, 8, 128, torch.bfloat16, seed)
        for t, x in zip((q, k, v), fresh):
            t.copy_(x)
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, tiles.attention(*fresh, causal=True))


@pytest.mark.parametrize("Sq,causal", [(1, True), (4, False), (3, True)], ids=["decode", "4rows", "3rows-causal"])
def test_ragged_cache_in_a_cuda_graph(Sq, causal):
    """A serving loop over a cache of ragged lengths, captured once: each program reads its sequence's key
    count (cache_seqlens) on the device, so replays after the counts change in place follow them. The
    launches cut short grids along the keys (short sequences' later parts see no key), the counts here
    straddle key blocks and include 0 and the whole cache. Each replay against float64 per sequence, and
    bitwise the eager call on the same counts."""
    needs.hopper_gpu()
    import tiles
    from tests.portability.reference import check_attention_fwd_ragged

    B, Sk, H, Hkv, D = 4, 5000, 32, 8, 128
    q, k, v = _inputs(B, Sq, Sk, H, Hkv, D, torch.bfloat16, 31)
    lens = torch.tensor([Sk, 129, 0, 2048], dtype=torch.int32, device="cuda")
    with torch.no_grad():
        tiles.attention(q, k, v, causal=causal, cache_seqlens=lens)  # compiled and loaded before the capture
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = tiles.attention(q, k, v, causal=causal, cache_seqlens=lens)
        for counts in ([1, 4999, 128, 0], [3000, 3000, 1, 77]):
            lens.copy_(torch.tensor(counts, dtype=torch.int32))
            g.replay()
            torch.cuda.synchronize()
            check_attention_fwd_ragged(out.cpu(), None, q.cpu(), k.cpu(), v.cpu(), lens.cpu(), causal and Sq > 1,
                                       D ** -0.5)
            assert torch.equal(out, tiles.attention(q, k, v, causal=causal, cache_seqlens=lens))


def test_paged_cache_in_a_cuda_graph():
    """Decode over a paged cache as a serving loop runs it: captured once, replayed after the counts and the
    table change in place (a sequence grows into a new page, pages move in the pool). Each program's producer
    reads its key blocks' pages from the table; each replay against float64 per sequence over the
    contiguous cache the pages hold, and bitwise the eager call."""
    needs.hopper_gpu()
    import tiles
    from tests.portability.reference import check_attention_fwd_ragged

    B, npages, P, H, Hkv, D = 3, 8, 256, 32, 8, 128
    q, k, v = _inputs(B, 1, npages * P, H, Hkv, D, torch.bfloat16, 41)
    pages = B * npages + 4
    g = torch.Generator().manual_seed(42)

    def pool_of(cache, table):
        pool = torch.full((pages, P, Hkv, D), float("nan"), dtype=cache.dtype, device="cuda")
        for b in range(B):
            for j in range(npages):
                pool[int(table[b, j])] = cache[b, j * P:(j + 1) * P]
        return pool

    table = torch.randperm(pages, generator=g)[:B * npages].view(B, npages).to(torch.int32).cuda()
    lens = torch.tensor([npages * P, 300, 1], dtype=torch.int32, device="cuda")
    pk, pv = pool_of(k, table), pool_of(v, table)
    with torch.no_grad():
        tiles.attention(q, pk, pv, causal=True, cache_seqlens=lens, block_table=table)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = tiles.attention(q, pk, pv, causal=True, cache_seqlens=lens, block_table=table)
        for counts in ([1, 2048, 257], [1500, 256, 0]):
            table.copy_(torch.randperm(pages, generator=g)[:B * npages].view(B, npages).to(torch.int32))
            lens.copy_(torch.tensor(counts, dtype=torch.int32))
            pk.copy_(pool_of(k, table))
            pv.copy_(pool_of(v, table))
            graph.replay()
            torch.cuda.synchronize()
            check_attention_fwd_ragged(out.cpu(), None, q.cpu(), k.cpu(), v.cpu(), lens.cpu(), False, D ** -0.5)
            assert torch.equal(out, tiles.attention(q, pk, pv, causal=True, cache_seqlens=lens, block_table=table))


def test_counts_on_the_host_cost_no_synchronization():
    """Counts and a table a serving loop keeps on the CPU are checked there and reach the device through
    pinned memory: the eager call synchronizes nothing (torch's sync debug mode raises where it would).
    The same counts on the device are checked with one synchronization, which the mode catches. Both
    calls bitwise equal."""
    needs.hopper_gpu()
    import tiles

    B, npages, P, H, Hkv, D = 3, 4, 256, 32, 8, 128
    q, k, v = _inputs(B, 1, npages * P, H, Hkv, D, torch.bfloat16, 43)
    counts = torch.tensor([1024, 300, 0], dtype=torch.int32)
    table = torch.arange(B * npages, dtype=torch.int32).view(B, npages)
    pk, pv = (t.reshape(B * npages, P, Hkv, D) for t in (k, v))
    on_device = counts.cuda()
    with torch.no_grad():
        ref = tiles.attention(q, k, v, cache_seqlens=on_device)  # compiled and loaded first
        paged_ref = tiles.attention(q, pk, pv, cache_seqlens=on_device, block_table=table.cuda())
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            out = tiles.attention(q, k, v, cache_seqlens=counts)
            paged = tiles.attention(q, pk, pv, cache_seqlens=counts, block_table=table)
            with pytest.raises(RuntimeError, match="synchroniz"):
                tiles.attention(q, k, v, cache_seqlens=on_device)
        finally:
            torch.cuda.set_sync_debug_mode(0)
    assert torch.equal(out, ref) and torch.equal(paged, paged_ref) and torch.equal(paged, ref)
