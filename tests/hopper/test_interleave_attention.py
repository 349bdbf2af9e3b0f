"""The attention forward declared `Interleave` on Hopper: each consumer warpgroup overlaps its own async
wgmmas with its softmax (the rotated loop, FlashAttention-3's intra-warpgroup overlap), and the
warpgroups run side by side without taking turns.

On the CPU: the generated source is the PingPong kernel's without its turns, line for line apart from
the declaration it names; it compiles through NVRTC without spills or serialized wgmmas; a loop whose
last mma cannot be rotated is refused with the reason. On an sm_90 GPU: the output against float64,
and bitwise the same as the PingPong kernel run without turns."""
from __future__ import annotations

import pytest
import torch

import needs  # tests/hopper is on sys.path
from tiles.core.lowering import LoweringError
from tiles.core.patterns import Interleave
from tiles.core.trace import KernelFn
from tiles.kernels import attention_fwd

interleaved = KernelFn(attention_fwd.fn, Interleave(stages=2))


def _meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


def _lower(kfn, D=128, causal=False, **options):
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    q, kv = _meta(2, 1000, 16, D), _meta(2, 1000, 4, D)
    lse = _meta(2, 16, 1000, dtype=torch.float32)
    cfg = W.config("attention_fwd", D=D, causal=causal, Sq=1000)
    return W(kfn.trace(q, kv, kv, q, lse, D ** -0.5, causal=causal, D=D, **cfg), **options).lower()


@pytest.mark.parametrize("D,causal", [(128, False), (128, True), (64, False), (64, True)])
def test_source_is_the_pingpong_kernel_without_turns(D, causal):
    low = _lower(interleaved, D, causal)
    src = low.source
    assert "// Interleave: each consumer warpgroup issues its loop's last mma in the next iteration" in src
    assert "the previous iteration's" in src  # the rotated mma, issued after the next iteration's first
    assert "take turns" not in src and "arch::bar_sync(1, 256)" not in src
    plain = _lower(attention_fwd, D, causal, pingpong=False).source
    ours = [line for line in src.splitlines() if not line.startswith("// Interleave:")
            and not line.startswith("// under the warpgroup's own softmax")]
    assert [line.replace("Interleave(stages=2)", "PingPong(stages=2)") for line in ours] == plain.splitlines()


def test_a_loop_it_cannot_rotate_is_refused():
    with pytest.raises(LoweringError, match="Interleave overlaps each warpgroup's wgmmas"):
        _lower(interleaved, rotate=False)


@pytest.mark.parametrize("D", [128, 64])
def test_compiles_without_spills(D, tmp_path):
    runtime = needs.nvrtc()
    from sass import disassemble
    from test_compile import assert_no_spills
    low = _lower(interleaved, D, peel=D == 128)
    c = runtime.compile_cuda(low.source, name=low.entry + ".cu", cache=False)
    assert_no_spills(c, low.entry, tmp_path)
    sass = disassemble(c.cubin, tmp_path)
    assert "HGMMA" in sass and "UTMALDG" in sass and "USETMAXREG" in sass


# ---------------------------------------------------------------------------------------- GPU

def _run(kfn, q, k, v, causal, **options):
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    B, Sq, H, D = q.shape
    o = torch.full_like(q, float("nan"))
    lse = torch.full((B, H, Sq), float("nan"), device=q.device)
    cfg = W.config("attention_fwd", D=D, causal=causal, Sq=Sq)
    opts = {"peel": True} if D == 128 else {}
    go = W.prepare(kfn, q, k, v, o, lse, D ** -0.5, causal=causal, D=D, options={**opts, **options}, **cfg)
    go()
    torch.cuda.synchronize()
    return o, lse


# (B, Sq, Sk, H, Hkv, D, causal, dtype)
SHAPES = [
    (4, 1024, 1024, 16, 16, 128, False, torch.bfloat16),  # more programs than SMs
    (3, 1000, 777, 12, 4, 128, True, torch.float16),      # query and key tails, GQA, rows that see no key
    (2, 700, 1300, 8, 1, 64, False, torch.bfloat16),      # D = 64 (three warpgroups), MQA
    (2, 512, 512, 8, 8, 64, True, torch.bfloat16),        # D = 64 causal (two warpgroups)
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:7])))
def test_against_float64_and_the_pingpong_kernel(shape):
    needs.hopper_gpu()
    import pathlib
    import sys
    sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "portability"))
    from reference import check_attention_fwd
    B, Sq, Sk, H, Hkv, D, causal, dtype = shape
    g = torch.Generator(device="cuda").manual_seed(Sq + Sk + D)
    q = torch.randn(B, Sq, H, D, device="cuda", generator=g).to(dtype)
    k, v = (torch.randn(B, Sk, Hkv, D, device="cuda", generator=g).to(dtype) for _ in range(2))
    o, lse = _run(interleaved, q, k, v, causal)
    check_attention_fwd(o, lse, q, k, v, causal, D ** -0.5)
    o0, lse0 = _run(attention_fwd, q, k, v, causal, pingpong=False)
    assert torch.equal(o, o0) and torch.equal(lse.nan_to_num(), lse0.nan_to_num())


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_every_launch_schedule_lowers(D, causal):
    """What launch() takes for an Interleave declaration: the PingPong kernel's schedule at each length,
    less the turns and ring_store (which hands its stage over in the turns)."""
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    for S in (512, 2048, 4096, 16384):
        q = torch.empty(1, S, 4, D, dtype=torch.bfloat16)
        opts = W.schedule("attention_fwd", D, (q, q, q, q, torch.empty(1, 4, S)), causal, interleaved.overlap) or {}
        assert not {"pingpong", "ring_store"} & set(opts)
        kv = _meta(1, S, 4, D)
        cfg = W.config("attention_fwd", D=D, causal=causal, Sq=S)
        k = interleaved.trace(kv, kv, kv, kv, _meta(1, 4, S, dtype=torch.float32), D ** -0.5, causal=causal, D=D, **cfg)
        assert "take turns" not in W(k, **opts).lower().source
