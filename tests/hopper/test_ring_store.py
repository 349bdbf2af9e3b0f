"""Option ring_store of the warp-specialized attention lowering: the forward's O stored by TMA from the
last key block's ring stage (its K tile, which both warpgroups' last S have read), not from registers.

On the CPU: the lowering's refusals, what the generated source does (the carved staging tiles, the
hand-over between the warpgroups, the stage given back under the next program's first turn), and that
it compiles through NVRTC without spills, its wgmmas not serialized, with a TMA store in the SASS. On
an sm_90 GPU: the output bitwise as without the option (the same sums, another path to memory) over
persistent walks of many programs, query and key tails, GQA, fp16, and causal rows that see no key
(programs with no iteration keep no stage and store from registers)."""
from __future__ import annotations

import pytest
import torch

import needs  # tests/hopper is on sys.path
from tiles.core.lowering import LoweringError


def _lower(D=128, causal=False, options=None):
    from test_attention_lower import _lower as lower
    return lower(D=D, causal=causal, options=options, launched=True)


def test_refusals():
    with pytest.raises(LoweringError, match="peel"):
        _lower(options={"ring_store": True})  # the rotated loop not peeled
    with pytest.raises(LoweringError, match="tma_store"):
        _lower(options={"peel": True, "ring_store": True, "tma_store": True})
    with pytest.raises(LoweringError, match="persistent"):
        _lower(options={"peel": True, "ring_store": True, "persistent": False})


@pytest.mark.parametrize("causal", [False, True])
def test_source(causal):
    low = _lower(causal=causal, options={"peel": True, "ring_store": True})
    src = low.source
    # O's rows of each warpgroup in its half of the kept stage's K tile, then one thread's TMA store
    assert "carve<bf16, WG_ROWS, 128, CONSUMERS>(S.kt[out_stage], cw)" in src
    assert "store_stmatrix(stage, o, 0);" in src  # f32 into bf16 four pairs an instruction
    assert "store_async_4d(map_O, stage," in src
    assert "const int out_stage = held;" in src and "if (held >= 0) release(S.ring.empty[held])" in src  # the loop's
    # the other warpgroup's last S has read K: one arrive an iteration's end, one wait before the store
    assert src.count("if (kb + 1 == kb_stop) arch::bar_arrive(8 + (1 - cw), 256);") == 2
    assert src.count("arch::bar_sync(8 + cw, 256);") == 1
    # the stage goes back under the next program's first turn (the peeled iteration), once read
    peeled = src.split("the first iteration, peeled")[1].split("for (int kb = 1;")[0]
    assert "release(S.ring.empty[staged]);" in peeled and "tma_store_wait_read<0>" in peeled
    # the LSE still from registers; O from registers only where no iteration kept a stage
    assert "store(L + " in src and "} else {\n        store(O + " in src
    plain = _lower(causal=causal, options={"peel": True})
    assert "carve<" not in plain.source and plain.entry != low.entry


def test_source_with_the_split_tail():
    """Whole tiles store through the kept stage; a part stores its rows into the workspace from
    registers, takes the other warpgroup's arrival all the same, and its stage goes back unused."""
    src = _lower(options={"peel": True, "ring_store": True, "split_tail": True}).source
    ring, rest = src.split("if (part < 0 && out_stage >= 0) {\n", 1)[1].split("} else {\n", 1)
    assert "store_async_4d(map_O, stage," in ring and "split_ws" not in ring
    unused = rest.split("// log2(alpha, l)")[0]
    assert unused.index("arch::bar_sync(8 + cw, 256);") < unused.index("staged = out_stage;") < unused.index("split_ws")
    assert "store(O + " in unused  # a whole tile whose walk kept no stage
    assert src.count("arch::bar_sync(8 + cw, 256);") == 2


@pytest.mark.parametrize("causal,split", [(False, False), (True, False), (False, True)],
                         ids=["non-causal", "causal", "split-tail"])
def test_compiles_without_spills_or_serialized_wgmmas(causal, split, tmp_path):
    runtime = needs.nvrtc()
    from test_compile import assert_no_spills
    from sass import disassemble
    low = _lower(causal=causal, options={"peel": True, "ring_store": True, "split_tail": split})
    c = runtime.compile_cuda(low.source, name=low.entry + ".cu", cache=False)
    assert_no_spills(c, low.entry, tmp_path)  # also: no C7519 (a test of `staged` at the store caused one)
    sass = disassemble(c.cubin, tmp_path)
    assert "UTMASTG" in sass and "HGMMA" in sass and "USETMAXREG" in sass
    assert sass.count("STSM.16.M88.4") == 8  # the staged O: 64 x 128 bf16 a warpgroup, 8 x 4 pairs a thread


def test_schedule():
    from tiles.backends.hopper.attention_launch import RING_STORE_QUERIES
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W

    def opts(D, S, causal=False, o=None):
        q = torch.empty(1, S, 1, D, dtype=torch.bfloat16)
        return W.schedule("attention_fwd", D, (q, q, q, q if o is None else o, torch.empty(1, 1, S)), causal) or {}
    for causal, top in RING_STORE_QUERIES.items():
        got = opts(128, top or 16384, causal)
        assert got.get("ring_store") is True and got.get("peel") is True and "tma_store" not in got
        assert top is None or "ring_store" not in opts(128, top + 1, causal)
    assert opts(128, 512, causal=True) == {"peel": True, "ring_store": True}  # in place of tma_store
    assert "ring_store" not in opts(64, 512)  # D = 64 keeps its tma_store
    # an O that TMA cannot write (rows 258 bytes apart, not a multiple of 16): stored from registers
    bad = torch.empty(512 * 129, dtype=torch.bfloat16).as_strided((1, 512, 1, 128), (512 * 129, 129, 128, 1))
    got = opts(128, 512, o=bad)
    assert "ring_store" not in got and "tma_store" not in got
    # a long key sequence takes the split tail as well (ring_store then stores its whole tiles)
    q, k = torch.empty(1, 512, 1, 128, dtype=torch.bfloat16), torch.empty(1, 8192, 1, 128, dtype=torch.bfloat16)
    got = W.schedule("attention_fwd", 128, (q, k, k, q, torch.empty(1, 1, 512)), False)
    assert got.get("split_tail") is True and got.get("ring_store") is True
    got = W.schedule("attention_fwd", 128, (k, k, k, k, torch.empty(1, 1, 8192)), False)
    assert got.get("split_tail") is True and "ring_store" not in got


# ---------------------------------------------------------------------------------------- GPU

def _run(q, k, v, causal, ring_store):
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.kernels import attention_fwd
    B, Sq, H, D = q.shape
    o = torch.full_like(q, float("nan"))
    lse = torch.full((B, H, Sq), float("nan"), device=q.device)
    opts = dict(W.schedule("attention_fwd", D, (q, k, v, o, lse), causal) or {})
    for x in ("tma_store", "split_tail", "ring_store"):
        opts.pop(x, None)
    opts.update(peel=True, ring_store=ring_store)
    cfg = W.config("attention_fwd", D=D, causal=causal, Sq=Sq)
    go = W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=causal, D=D, options=opts, **cfg)
    go()
    torch.cuda.synchronize()
    assert ("carve<" in go.lowered.source) == ring_store, go.lowered.entry
    return o, lse


# (B, Sq, Sk, H, Hkv, causal, dtype): every one walks more programs than SMs unless said
SHAPES = [
    (8, 1024, 1024, 16, 16, False, torch.bfloat16),   # 1024 programs, 7-8 a CTA
    (32, 512, 512, 16, 16, False, torch.bfloat16),    # one or four key blocks a program
    (4, 1000, 1000, 16, 4, False, torch.float16),     # query and key tails (TMA drops rows past Sq), GQA
    (8, 1024, 1024, 16, 16, True, torch.bfloat16),    # causal pairs' walk
    (6, 700, 300, 16, 2, True, torch.bfloat16),       # Sq > Sk: programs whose rows see no key (no stage kept)
    (2, 333, 2111, 8, 1, True, torch.float16),        # Sk > Sq, MQA, a short grid
    (1, 128, 128, 1, 1, False, torch.bfloat16),       # one program, one block
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:6])))
def test_bitwise_as_without_the_option(shape):
    needs.hopper_gpu()
    B, Sq, Sk, H, Hkv, causal, dtype = shape
    g = torch.Generator(device="cuda").manual_seed(Sq + Sk + H)
    q = torch.randn(B, Sq, H, 128, device="cuda", generator=g).to(dtype)
    k, v = (torch.randn(B, Sk, Hkv, 128, device="cuda", generator=g).to(dtype) for _ in range(2))
    o0, l0 = _run(q, k, v, causal, False)
    o1, l1 = _run(q, k, v, causal, True)
    assert not o1.isnan().any()
    assert torch.equal(o0, o1) and torch.equal(l0.nan_to_num(), l1.nan_to_num())
    o2, l2 = _run(q, k, v, causal, True)  # repeatable
    assert torch.equal(o1, o2) and torch.equal(l1.nan_to_num(), l2.nan_to_num())


# (B, Sq, Sk, H, Hkv, dtype): the split tail's walks, non-causal
SPLIT_SHAPES = [
    (4, 4096, 4096, 16, 16, torch.bfloat16),  # the standard shape: 1980 whole tiles, the rest in parts
    (1, 2048, 4096, 20, 20, torch.bfloat16),  # 320 programs: 264 whole, 56 in halves
    (3, 1000, 5000, 12, 4, torch.float16),    # query and key tails, GQA: 264 whole, 24 in fifths
    (1, 1024, 4096, 8, 8, torch.bfloat16),    # a short grid: every program in parts, no stage stored through
]


@pytest.mark.parametrize("shape", SPLIT_SHAPES, ids=lambda s: "x".join(map(str, s[:5])))
def test_split_tail_bitwise_as_without_the_option(shape):
    """With the split tail, whole tiles store through the kept stage and parts into the workspace;
    every output bit as the split tail's alone, whose tests hold it to float64."""
    needs.hopper_gpu()
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.kernels import attention_fwd
    B, Sq, Sk, H, Hkv, dtype = shape
    g = torch.Generator(device="cuda").manual_seed(Sq + Sk + H)
    q = torch.randn(B, Sq, H, 128, device="cuda", generator=g).to(dtype)
    k, v = (torch.randn(B, Sk, Hkv, 128, device="cuda", generator=g).to(dtype) for _ in range(2))
    outs = []
    for ring in (False, True, True):
        o = torch.full_like(q, float("nan"))
        lse = torch.full((B, H, Sq), float("nan"), device="cuda")
        opts = {**(W.SCHEDULES.get(("attention_fwd", 128)) or {}), "peel": True, "split_tail": True, "ring_store": ring}
        cfg = W.config("attention_fwd", D=128, causal=False, Sq=Sq)
        go = W.prepare(attention_fwd, q, k, v, o, lse, 128 ** -0.5, causal=False, D=128, options=opts, **cfg)
        go()
        torch.cuda.synchronize()
        assert go.split is not None and go.split[1] > 1, go.split
        assert ("carve<" in go.lowered.source) == ring
        outs.append((o, lse))
    assert not outs[1][0].isnan().any() and not outs[1][1].isnan().any()
    for o, lse in outs[1:]:  # and repeatable
        assert torch.equal(o, outs[0][0]) and torch.equal(lse, outs[0][1])


def test_through_the_api_against_float64():
    needs.hopper_gpu()
    import pathlib
    import sys
    import tiles
    sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "portability"))
    from reference import check_attention_fwd
    from tiles.backends.hopper.attention_launch import RING_STORE_QUERIES
    for causal, S in RING_STORE_QUERIES.items():
        S = S or 2048
        g = torch.Generator(device="cuda").manual_seed(S)
        q, k, v = (torch.randn(3, S, 8, 128, device="cuda", generator=g).bfloat16() for _ in range(3))
        o, lse = tiles.attention(q, k, v, causal=causal, return_lse=True)
        check_attention_fwd(o, lse, q, k, v, causal, 128 ** -0.5)
