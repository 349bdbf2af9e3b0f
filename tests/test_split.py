"""The pipelined loop's merge= declaration (ir.LseMerge), on the CPU: the interpreter running each
program's key blocks in parts and merging them by split.merge_lse must give what the whole loop
gives. This is the algebra the Hopper split tail (tests/hopper/test_split_tail.py) relies on."""
import math

import pytest
import torch

from tiles.core import interp, split
from tiles.kernels import attention_fwd


def test_part_range_covers_in_order():
    for n in (0, 1, 2, 5, 32, 33):
        for parts in (1, 2, 3, 5, 8):
            got = [split.part_range(4, 4 + n, p, parts) for p in range(parts)]
            assert got[0][0] == 4 and got[-1][1] == 4 + n
            assert all(a[1] == b[0] for a, b in zip(got, got[1:]))
            sizes = [hi - lo for lo, hi in got]
            assert max(sizes) - min(sizes) <= 1
    with pytest.raises(ValueError, match="part must be in"):
        split.part_range(0, 4, 3, 3)


def test_merge_lse_matches_one_softmax():
    torch.manual_seed(0)
    s = torch.randn(6, 40, dtype=torch.float64) * 3  # six rows of scores over 40 keys
    v = torch.randn(40, 8, dtype=torch.float64)
    whole = torch.softmax(s, -1) @ v
    cuts = [(0, 13), (13, 14), (14, 40)]
    outs = torch.stack([torch.softmax(s[:, a:b], -1) @ v[a:b] for a, b in cuts])
    lses = torch.stack([torch.logsumexp(s[:, a:b], -1) for a, b in cuts])
    out, lse = split.merge_lse(outs, lses)
    assert torch.allclose(out.double(), whole, atol=1e-5)
    assert torch.allclose(lse.double(), torch.logsumexp(s, -1), atol=1e-5)


def test_merge_lse_leaves_out_empty_parts():
    outs = torch.stack([torch.zeros(2, 3), torch.ones(2, 3) * 5, torch.zeros(2, 3)])
    lses = torch.tensor([[math.inf, math.inf], [1.5, math.inf], [math.inf, math.inf]])
    out, lse = split.merge_lse(outs, lses)
    assert torch.equal(out, torch.tensor([[5.0] * 3, [0.0] * 3]))
    assert lse[0].item() == pytest.approx(1.5) and lse[1].item() == math.inf
    with_nan = outs.clone()
    with_nan[1, 0, 0] = math.nan  # a live part's NaN is never hidden
    assert math.isnan(split.merge_lse(with_nan, lses)[0][0, 0].item())


def _run(q, k, v, causal, parts):
    o = torch.empty_like(q)
    lse = torch.empty(q.shape[0], q.shape[2], q.shape[1])
    args = (q, k, v, o, lse, q.shape[-1] ** -0.5)
    kw = dict(causal=causal, D=q.shape[-1], BM=16, BN=16)
    kern = attention_fwd.trace(*args, **kw)
    interp.run(kern, {"Q": q, "K": k, "V": v, "O": o, "L": lse},
               attention_fwd.runtime_env(kern, attention_fwd.bind(*args, **kw)), "cpu", parts=parts)
    return o, lse


@pytest.mark.parametrize("causal,Sq,Sk,H,Hkv,parts", [
    (False, 40, 72, 2, 2, 3),   # query and key tails
    (False, 32, 80, 4, 2, 2),   # GQA
    (True, 48, 48, 2, 1, 3),    # causal: the first blocks' later parts see no key
    (True, 24, 56, 2, 2, 5),    # causal, bottom-right aligned, more parts than some blocks have
])
def test_interpreter_split_agrees_with_whole(causal, Sq, Sk, H, Hkv, parts):
    g = torch.Generator().manual_seed(Sq + Sk + parts)
    q = torch.randn(2, Sq, H, 16, generator=g).bfloat16()
    k = torch.randn(2, Sk, Hkv, 16, generator=g).bfloat16()
    v = torch.randn(2, Sk, Hkv, 16, generator=g).bfloat16()
    o1, l1 = _run(q, k, v, causal, 1)
    o3, l3 = _run(q, k, v, causal, parts)
    assert torch.isfinite(l1).any()
    # a part normalizes by its own sum, so the merged O is the whole one up to the bf16 rounding of
    # P before P V in each part (a different rounding point, not a different result)
    assert (o3.float() - o1.float()).abs().max().item() < 2e-2
    assert torch.equal(torch.isinf(l1), torch.isinf(l3))
    fin = torch.isfinite(l1)
    assert (l3[fin] - l1[fin]).abs().max().item() < 1e-4


def test_parts_need_a_merge_declaration():
    from tiles.kernels.attention import attention_bwd_prep
    O = torch.randn(1, 8, 1, 16)
    dO, delta = torch.randn(1, 8, 1, 16), torch.empty(1, 1, 8)
    kern = attention_bwd_prep.trace(O, dO, delta, D=16)
    with pytest.raises(ValueError, match="declares no merge"):
        interp.run(kern, {"O": O, "dO": dO, "Delta": delta},
                   attention_bwd_prep.runtime_env(kern, attention_bwd_prep.bind(O, dO, delta, D=16)), "cpu", parts=2)


def test_lse_merge_rejects_bad_declarations():
    from tiles.core.trace import kernel
    from tiles.core.lang import store, zero
    from tiles.core.dtypes import f32

    def make(bad):
        @kernel
        def k_(k, X, Y, L):
            k.grid(1, 1, 1)
            acc = k.reg(16, 16, f32)
            zero(acc)
            m = {"dtype": lambda: k.lse_merge(X, Y), "same": lambda: k.lse_merge(X, X),
                 "notensor": lambda: k.lse_merge(X, 3)}[bad]()
            for _ in k.pipeline(1, merge=m):
                pass
            store(X[:, :], acc, row=0, col=0)
        return k_

    X, Y, L = torch.zeros(16, 16), torch.zeros(16, dtype=torch.bfloat16), torch.zeros(16)
    for bad, msg in (("dtype", "must be float32"), ("same", "different tensors"), ("notensor", "tensor parameter")):
        with pytest.raises(Exception, match=msg):
            make(bad).trace(X, Y, L)


def test_merge_leaves_out_a_part_that_saw_no_key_and_keeps_nan():
    """A part with lse = +inf carries no weight whatever its out holds; a NaN lse keeps the row NaN (not
    +inf, which would read as "saw no key" and zero the row's gradients)."""
    import math

    import torch

    from tiles.core.split import merge_lse
    out, lse = merge_lse(torch.tensor([[[1.0, 2.0]], [[float("nan"), math.inf]]]), torch.tensor([[0.5], [math.inf]]))
    assert torch.equal(out, torch.tensor([[1.0, 2.0]])) and lse.item() == 0.5
    out, lse = merge_lse(torch.tensor([[[1.0, 2.0]], [[3.0, 4.0]]]), torch.tensor([[0.5], [float("nan")]]))
    assert torch.isnan(out).all() and torch.isnan(lse).all()
    out, lse = merge_lse(torch.tensor([[[1.0, 2.0]], [[3.0, 4.0]]]), torch.tensor([[math.inf], [math.inf]]))
    assert torch.equal(out, torch.zeros(1, 2)) and lse.item() == math.inf


def test_short_grid_parts_is_the_plan_below_a_wave():
    """The one rule both launchers cut short grids by (decode): the plan's parts below a wave from
    SHORT_GRID_TRIPS trips, nothing at a wave or more, or with fewer trips."""
    assert split.short_grid_parts(8, 132, 256) == split.plan(8, 132, 256)[1] == 16
    assert split.short_grid_parts(1, 304, split.SHORT_GRID_TRIPS) == split.plan(1, 304, split.SHORT_GRID_TRIPS)[1] > 1
    assert split.short_grid_parts(1, 304, split.SHORT_GRID_TRIPS - 1) == 1
    assert split.short_grid_parts(132, 132, 256) == split.short_grid_parts(300, 132, 256) == 1
