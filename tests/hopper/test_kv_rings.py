"""Option kv_rings of the warp-specialized attention lowering: the tile only the deferred mma reads (the
forward's V) on barriers of its own, so K's stage goes back as soon as S has read it.

On the CPU: the refusals, what the generated source does (each tile's own release and arrival, V waited
for before the turn that issues the deferred mma, K's last stage kept for ring_store), and that it
compiles through NVRTC without spills or serialized wgmmas, at 128 keys a block (three stages) and at
192 (two). On an sm_90 GPU: the output bitwise as without the option (the same sums, other barriers)
over persistent walks, tails, GQA, causal rows that see no key, ring_store and the split tail; 192-key
blocks against float64."""
from __future__ import annotations

import pathlib
import sys

import pytest
import torch

import needs  # tests/hopper is on sys.path
from tiles.core.lowering import LoweringError


def _lower(D=128, causal=False, options=None, **over):
    from test_attention_lower import _lower as lower
    return lower(D=D, causal=causal, options=options, **over)


def test_refusals():
    with pytest.raises(LoweringError, match="rotated loop"):
        _lower(options={"kv_rings": True, "rotate": False})
    from test_attention_lower import _lower as lower
    with pytest.raises(LoweringError, match="stopped short"):
        lower(D=128, causal=False, options={"kv_rings": True}, ragged=True)


@pytest.mark.parametrize("peel", [False, True])
def test_source(peel):
    src = _lower(options={"peel": peel, "kv_rings": True}).source
    assert "ring<STAGES> late;" in src and "S.late.init_all(1, CONSUMERS * 128);" in src
    # the producer: K behind the ring's release, V behind its own
    assert "expect_tiles(S.ring.full[pos.stage], S.kt[pos.stage]);" in src
    assert "wait(S.late.empty[pos.stage], pos.phase ^ 1);" in src
    assert "expect_tiles(S.late.full[pos.stage], S.vt[pos.stage]);" in src
    assert "map_V, S.late.full[pos.stage]" in src
    # K's stage back once S has retired, in every iteration (the peeled one too); V's after the P V
    assert src.count("release(S.ring.empty[pos.stage]);") == (2 if peel else 1)
    assert "release(S.ring.empty[held])" not in src and src.count("release(S.late.empty[held])") == 2
    # V waited for before the turn in which the deferred P V goes out: in the loop and after it
    loop = src.split("for (int kb = 1;" if peel else "for (int kb = 0;")[-1]
    wait = "wait(S.late.full[held], held_phase);"
    assert loop.index(wait) < loop.index("arch::bar_sync(1 + cw, 256);") < loop.index("mma_AB(o, p, S.vt[held], true);")
    assert src.count(wait) == 2 and src.count("held_phase = pos.phase;") == (2 if peel else 1)
    plain = _lower(options={"peel": peel})
    assert "S.late" not in plain.source and plain.entry + "kv" == _lower(options={"peel": peel, "kv_rings": True}).entry


def test_source_with_ring_store():
    """ring_store keeps the last iteration's K stage for the O store: K's release skips that iteration,
    and V's stage goes back after the loop."""
    src = _lower(options={"peel": True, "kv_rings": True, "ring_store": True}).source
    assert src.count("if (kb + 1 != kb_stop) release(S.ring.empty[pos.stage]);") == 2
    assert "release(S.ring.empty[pos.stage]);  // its tiles' last readers retired (" not in src
    after = src.split("// mma(o, p, vt, accumulate=True)  [the last iteration's")[1]
    assert after.index("if (held >= 0) release(S.late.empty[held]);") < after.index("const int out_stage = held;")
    assert "release(S.ring.empty[staged]);" in src  # given back once the store has read it


CASES = [(128, False, {"peel": True}), (128, True, {}), (192, False, {"peel": True}), (192, True, {}),
         (128, False, {"peel": True, "split_tail": 3}),
         (192, False, {"peel": True, "split_tail": 3, "ring_store": True}),
         (128, True, {"peel": True, "ring_store": True})]


@pytest.mark.parametrize("bn,causal,opts", CASES, ids=lambda x: str(x))
def test_compiles_without_spills(bn, causal, opts, tmp_path):
    from test_compile import assert_no_spills
    from tiles.backends.hopper import runtime
    low = _lower(causal=causal, options={**opts, "kv_rings": True}, BM=128, BN=bn)
    assert f"constexpr int STAGES = {3 if bn == 128 else 2};" in low.source
    c = runtime.compile_cuda(low.source, name=f"{low.entry}.cu", cache=False)
    assert_no_spills(c, low.entry, tmp_path)


# ---------------------------------------------------------------------------------------- GPU

def _run(q, k, v, causal, opts, BN=128):
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.kernels import attention_fwd
    B, Sq, H, D = q.shape
    o = torch.full_like(q, float("nan"))
    lse = torch.full((B, H, Sq), float("nan"), device=q.device)
    go = W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=causal, D=D, options=opts, BM=128, BN=BN)
    go()
    torch.cuda.synchronize()
    assert ("S.late" in go.lowered.source) == bool(opts.get("kv_rings")), go.lowered.entry
    return o, lse


# (B, Sq, Sk, H, Hkv, causal, dtype)
SHAPES = [
    (8, 1024, 1024, 16, 16, False, torch.bfloat16),   # 1024 programs, 7-8 a CTA
    (4, 1000, 1000, 16, 4, False, torch.float16),     # query and key tails, GQA
    (8, 1024, 1024, 16, 16, True, torch.bfloat16),    # causal pairs' walk
    (6, 700, 300, 16, 2, True, torch.bfloat16),       # Sq > Sk: programs whose rows see no key
    (1, 128, 128, 1, 1, False, torch.bfloat16),       # one program, one block
]


def _inputs(B, Sq, Sk, H, Hkv, dtype, D=128):
    g = torch.Generator(device="cuda").manual_seed(Sq + Sk + H)
    q = torch.randn(B, Sq, H, D, device="cuda", generator=g).to(dtype)
    k, v = (torch.randn(B, Sk, Hkv, D, device="cuda", generator=g).to(dtype) for _ in range(2))
    return q, k, v


@pytest.mark.parametrize("peel", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:6])))
def test_bitwise_as_without_the_option(shape, peel):
    needs.hopper_gpu()
    B, Sq, Sk, H, Hkv, causal, dtype = shape
    q, k, v = _inputs(B, Sq, Sk, H, Hkv, dtype)
    o0, l0 = _run(q, k, v, causal, {"peel": peel})
    o1, l1 = _run(q, k, v, causal, {"peel": peel, "kv_rings": True})
    assert not o1.isnan().any()
    assert torch.equal(o0, o1) and torch.equal(l0.nan_to_num(), l1.nan_to_num())
    o2, l2 = _run(q, k, v, causal, {"peel": peel, "kv_rings": True})  # repeatable
    assert torch.equal(o1, o2) and torch.equal(l1.nan_to_num(), l2.nan_to_num())


@pytest.mark.parametrize("ring_store", [False, True])
def test_split_tail_bitwise_as_without_the_option(ring_store):
    needs.hopper_gpu()
    q, k, v = _inputs(3, 1000, 5000, 12, 4, torch.bfloat16)  # 264 whole tiles, 24 in parts
    opts = {"peel": True, "split_tail": True, "ring_store": ring_store}
    o0, l0 = _run(q, k, v, False, opts)
    o1, l1 = _run(q, k, v, False, {**opts, "kv_rings": True})
    assert torch.equal(o0, o1) and torch.equal(l0, l1)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:6])))
def test_ring_store_bitwise_as_without_the_option(shape):
    needs.hopper_gpu()
    B, Sq, Sk, H, Hkv, causal, dtype = shape
    q, k, v = _inputs(B, Sq, Sk, H, Hkv, dtype)
    o0, l0 = _run(q, k, v, causal, {"peel": True, "ring_store": True})
    o1, l1 = _run(q, k, v, causal, {"peel": True, "ring_store": True, "kv_rings": True})
    assert not o1.isnan().any()
    assert torch.equal(o0, o1) and torch.equal(l0.nan_to_num(), l1.nan_to_num())


@pytest.mark.parametrize("causal", [False, True])
def test_wide_key_blocks_against_float64(causal):
    """192 keys a block in two stages: K lands an iteration ahead on its own barriers."""
    needs.hopper_gpu()
    sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "portability"))
    from reference import check_attention_fwd
    q, k, v = _inputs(2, 1000, 1500, 8, 2, torch.bfloat16)
    o, lse = _run(q, k, v, causal, {"peel": not causal, "kv_rings": True}, BN=192)
    check_attention_fwd(o, lse, q, k, v, causal, 128 ** -0.5)
