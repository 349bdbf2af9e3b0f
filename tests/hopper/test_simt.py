"""The generic (no-mma) Hopper lowering on a CPU machine: the suite's layernorm, rotary and
attention_bwd_prep (and a kernel of the user's made of the other ops) lower op by op, compile for
sm_90a through NVRTC and nvcc without spills, and `tiles show --emit` gives a standalone unit."""
from __future__ import annotations

import itertools
import shutil
import subprocess
import sys

import pytest
import torch

from tiles import backends
from tiles.core import ir
from tiles.core.dtypes import bf16, f32
from tiles.core.lang import (add_col, col_max, col_sum, exp, fill, fill_where, load, mask_causal, mask_rows,
                             mask_window, mma, mul, row_max, store, sub_col, zero)
from tiles.core.lowering import LoweringError
from tiles.core.patterns import Pipelined
from tiles.core.trace import kernel
from tiles.kernels import SUITE, attention_bwd_prep, layernorm, rotary
from tiles.backends.hopper import lower_simt
from tiles.backends.hopper.backend import LOWERINGS


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


@pytest.fixture(scope="module")
def hopper():
    return backends.get("hopper")


def layernorm_args(M=4096, N=4096, dt=torch.bfloat16):
    NP = 1 << max(0, (N - 1).bit_length())
    kw = dict(NP=NP, **LOWERINGS["layernorm"].config(N=N))
    return (meta(M, N, dtype=dt), meta(N, dtype=dt), meta(N, dtype=dt), meta(M, N, dtype=dt), 1e-5), kw


def rotary_args(D=128, dt=torch.bfloat16, tdt=torch.float32):
    return (meta(2, 1024, 16, D, dtype=dt), meta(1024, D // 2, dtype=tdt), meta(1024, D // 2, dtype=tdt),
            meta(2, 1024, 16, D, dtype=dt)), dict(D=D)


def prep_args(D=128, dt=torch.bfloat16):
    return (meta(2, 1024, 16, D, dtype=dt), meta(2, 1024, 16, D, dtype=dt), meta(2, 16, 1024, dtype=torch.float32)), dict(D=D)


@kernel(overlap=Pipelined(stages=1))
def masked_softmax_stats(k, S, Out, ColMax, *, BM=32, BN=64):
    """A user's kernel: row max, exp against it, causal, window and row masks, column reductions, a loop."""
    M, N = S.shape
    k.grid(k.cdiv(M, BM))
    r0 = k.program_id(0) * BM
    s = k.reg(BM, BN, f32)
    p = k.reg(BM, BN, bf16)
    m = k.vec(BM, f32)
    cm = k.vec(BN, f32, axis="col")
    cs = k.vec(BN, f32, axis="col")
    fill(cm, float("-inf"))
    for j in k.range(0, k.cdiv(N, BN)):
        load(s, S[:, :], row=r0, col=j * BN)
        mask_causal(s, r0, j * BN, 0, float("-inf"))
        mask_window(s, r0, j * BN, -40, float("-inf"))  # and a sliding window's left edge, 40 keys back
        row_max(m, s)
        col_max(cm, s, init=cm)
        fill_where(m, m, "==", float("-inf"), 0.0)
        exp(s, s)
        mask_rows(s, r0, M, 0.0)
        sub_col(s, s, cm)
        col_sum(cs, s)
        zero(p)
        store(Out[:, :], s, row=r0, col=j * BN)
    store(ColMax[:], cm, row=0)


CASES = {
    "layernorm_4096_bf16": (layernorm, *layernorm_args()),
    "layernorm_16384_f32": (layernorm, *layernorm_args(64, 16384, torch.float32)),
    "layernorm_1_f16": (layernorm, *layernorm_args(3, 1, torch.float16)),
    "layernorm_300_bf16": (layernorm, *layernorm_args(5, 300)),
    "rotary_128": (rotary, *rotary_args()),
    "rotary_32_f32": (rotary, *rotary_args(32, torch.float32)),
    "rotary_64_bf16_tables": (rotary, *rotary_args(64, torch.bfloat16, torch.bfloat16)),
    "attention_bwd_prep_128": (attention_bwd_prep, *prep_args()),
    "attention_bwd_prep_64_f16": (attention_bwd_prep, *prep_args(64, torch.float16)),
    "user_kernel": (masked_softmax_stats, (meta(500, 300, dtype=torch.float32), meta(500, 300), meta(300, dtype=torch.float32)), {}),
}


def test_the_three_suite_kernels_are_registered():
    for name in ("layernorm", "rotary", "attention_bwd_prep"):
        assert issubclass(LOWERINGS[name], lower_simt.SimtLowering)
        assert backends.get("hopper").supports(name)


@pytest.mark.parametrize("case", list(CASES))
def test_lowers_one_line_per_op(hopper, case):
    kfn, args, kw = CASES[case]
    lo = hopper.lower(kfn, *args, **kw) if kfn.name in SUITE else lower_simt.SimtLowering(kfn.trace(*args, **kw)).lower()
    k = lo.kernel
    ops = [n for n in k.walk() if isinstance(n, ir.Op)]
    body = lo.source.split("#include", 1)[1]
    for op in ops:
        assert f";  // {ir.format_op(op)}" in body, ir.format_op(op)
    scratch = 1 if lo.notes["static_smem"] else 0  # the shared scratch of cross-warp reductions
    assert body.count(";  // ") == len(ops) + len(k.tiles) + scratch  # one statement per op, one declaration per tile
    assert "asm" not in body
    assert lo.block[0] % 32 == 0 and lo.block[0] <= lower_simt.MAX_THREADS
    assert [a[0] for a in lo.args].count("ptr") == len(k.params)


def _coverage(R, C, TR, TC):
    """Every (row, col) of an R x C tile is held by exactly one (thread, slot) of simt.h's layout."""
    V = lower_simt.chunk_width(C, TC)
    NI, NJ = -(-R // TR), -(-C // (TC * V))
    seen = []
    for tr, tc, i, j, e in itertools.product(range(TR), range(TC), range(NI), range(NJ), range(V)):
        r, c = tr + i * TR, (j * TC + tc) * V + e
        if r < R and c < C:
            seen.append((r, c))
    return len(seen) == R * C and set(seen) == set(itertools.product(range(R), range(C)))


@pytest.mark.parametrize("R,C", [(1, 1), (2, 4096), (64, 64), (64, 128), (5, 300), (16, 8), (3, 17)])
def test_layout_covers_each_element_once(R, C):
    TR, TC = lower_simt.choose_layout([ir.Tile("t", "reg", (R, C), f32)])
    assert (TR * TC) % 32 == 0
    assert (TC <= 32 and 32 % TC == 0) or TC % 32 == 0
    assert _coverage(R, C, TR, TC)


def test_mma_and_shared_tiles_are_refused():
    @kernel(overlap=Pipelined(stages=1))
    def with_mma(k, A, C):
        a = k.reg(64, 64, bf16)
        acc = k.reg(64, 64, f32)
        k.grid(1)
        load(a, A[:, :], row=0, col=0)
        mma(acc, a, a, accumulate=False)
        store(C[:, :], acc, row=0, col=0)

    with pytest.raises(LoweringError, match="mma"):
        lower_simt.SimtLowering(with_mma.trace(meta(64, 64), meta(64, 64, dtype=torch.float32))).lower()


# ---------------------------------------------------------------- compiling
nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-python (cuda.bindings.nvrtc) is not installed")
from tiles.backends.hopper import runtime  # noqa: E402


def _nvrtc_ok():
    try:
        runtime.nvrtc_version()
        return True
    except Exception:
        return False


needs_nvrtc = pytest.mark.skipif(not _nvrtc_ok(), reason="NVRTC is not loadable")


def _lowered(case):
    kfn, args, kw = CASES[case]
    return backends.get("hopper").lower(kfn, *args, **kw)  # a user's kernel without mma: the SIMT lowering


@needs_nvrtc
@pytest.mark.parametrize("case", list(CASES))
def test_nvrtc_compiles_without_spills(case, tmp_path):
    lo = _lowered(case)
    c = runtime.compile_cuda(lo.source, name=lo.entry + ".cu", cache=False)
    assert "warning #" not in (c.log or ""), c.log  # no front-end warning in code users read
    res = c.resources.get(lo.entry)
    if res is None:  # the NVRTC log without ptxas' lines (seen on the H200 machine): read the cubin
        from sass import res_usage
        res = res_usage(c.cubin, lo.entry, tmp_path)
        assert res["local"] == 0 and res["stack"] == 0, res
        return
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0 and res["stack"] == 0, c.log
    assert res["registers"] * lo.block[0] <= 65536, res


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("case", ["layernorm_4096_bf16", "rotary_128", "attention_bwd_prep_128", "user_kernel"])
def test_nvcc_compiles_sm90a(case, tmp_path):
    lo = _lowered(case)
    src = tmp_path / "k.cu"
    src.write_text(lo.source)
    p = subprocess.run(["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-Xptxas", "-v", "-std=c++17",
                        f"-I{runtime.INCLUDE_DIR}", str(src), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    res = runtime.parse_ptxas(p.stderr + p.stdout)[lo.entry]
    assert res["spill_stores"] == 0 and res["stack"] == 0


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("name", ["layernorm", "rotary", "attention_bwd_prep"])
def test_show_emit_compiles_standalone(name, tmp_path):
    out = tmp_path / "emit"
    p = subprocess.run([sys.executable, "-m", "tiles", "show", name, "--backend", "hopper", "--emit", str(out)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    srcs = list(out.glob("*.cu"))
    assert len(srcs) == 1 and (out / "tiles" / "simt.h").exists()
    p = subprocess.run(["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-std=c++17", f"-I{out}",
                        str(srcs[0]), "-o", str(tmp_path / "k.cubin")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_grid_past_cuda_limits_is_refused_before_launch():
    """rotary's grid is (cdiv(S, 64), heads, batch): 70000 heads pass CUDA's 65535 on the grid's y axis.
    The launcher says so, naming the limit, before any launch (a 1.1 MB tensor: no memory to speak of)."""
    import needs
    needs.hopper_gpu()
    x = torch.randn(1, 1, 70000, 8, device="cuda")
    cos, sin = torch.ones(1, 4, device="cuda"), torch.zeros(1, 4, device="cuda")
    with pytest.raises(ValueError, match=r"grid \[1, 70000, 1\] passes CUDA's limits"):
        import tiles
        tiles.rotary(x, cos, sin, backend="hopper")


@needs_nvrtc
def test_tensors_named_like_the_templates_own_names_compile():
    """Tensors named L (the layout typedef), simt, scratch or pid0 are renamed in the C++ (L_, ...), as
    keywords are, instead of hiding the template's names."""
    @kernel(overlap=Pipelined(stages=1))
    def clash(k, L, simt, scratch, pid0):
        k.grid(1)
        t = k.reg(16, 32, f32)
        load(t, L[:, :])
        store(simt[:, :], t)
        store(scratch[:, :], t)
        store(pid0[:, :], t)

    x = torch.empty(16, 32, device="meta")
    lo = lower_simt.SimtLowering(clash.trace(x, x, x, x)).lower()
    assert "const float* __restrict__ L_" in lo.source and "float* simt_" in lo.source
    runtime.compile_cuda(lo.source, name=lo.entry + ".cu", cache=False)  # raises CompileError if a name hides one


@kernel(overlap=Pipelined(stages=1))
def scale_shift(k, X, Bias, Y, alpha, *, BM=16, N=64):
    """docs/getting-started.md's first kernel."""
    M = X.shape[0]
    k.grid(k.cdiv(M, BM))
    r0 = k.program_id(0) * BM
    x = k.reg(BM, N, f32)
    b = k.vec(N, f32, axis="col")
    load(x, X[:, :], row=r0, col=0)
    load(b, Bias[:], row=0)
    mul(x, x, alpha)
    add_col(x, x, b)
    store(Y[:, :], x, row=r0, col=0)


def test_a_users_kernel_without_mma_takes_the_simt_lowering(hopper):
    """As on CDNA: a kernel of the user's without mma lowers op by op; one with mma is tried as a GEMM."""
    lo = hopper.lower(scale_shift, meta(50, 64, dtype=torch.float32), meta(64, dtype=torch.float32),
                      meta(50, 64, dtype=torch.float32), 0.5)
    assert "simt::bcast_col<float>(x, x, b, simt::add{});" in lo.source
    assert hopper._lowering("scale_shift", scale_shift.trace(meta(50, 64), meta(64), meta(50, 64), 0.5)) is \
        lower_simt.SimtLowering


@pytest.mark.parametrize("shape,dtype", [((50, 64), torch.float32), ((1000, 64), torch.bfloat16), ((7, 64), torch.float16)])
def test_users_kernels_run_on_the_gpu_as_in_the_interpreter(shape, dtype):
    """On an sm_90 GPU: the getting-started kernel and the masked softmax statistics above, launched through
    backends.get('hopper'), give the interpreter's results (elementwise f32 math: to rounding)."""
    import needs
    hop = needs.hopper_gpu()
    interp = backends.get("interp")
    g = torch.Generator().manual_seed(shape[0])
    X, bias = torch.randn(*shape, generator=g).to(dtype), torch.randn(shape[1], generator=g).to(dtype)
    want = torch.empty_like(X)
    interp.launch(scale_shift, X, bias, want, 0.3)
    got = torch.empty_like(X).cuda()
    hop.launch(scale_shift, X.cuda(), bias.cuda(), got, 0.3)
    torch.cuda.synchronize()
    # f32: mul then add, which the GPU may fuse (one rounding fewer); 16-bit outputs: one rounding apart
    rtol = {torch.float32: 1e-6, torch.bfloat16: 2 ** -7, torch.float16: 2 ** -10}[dtype]
    torch.testing.assert_close(got.cpu().float(), want.float(), rtol=rtol, atol=1e-6)
    # one program (32 rows, BM = 32): every program stores its own column maxima into ColMax[0:64], so
    # with more than one the result would be whichever finished last
    S = torch.randn(min(shape[0], 32), 300, generator=g)
    outs = {}
    for name, be, dev in (("interp", interp, "cpu"), ("hopper", hop, "cuda")):
        out = torch.full((S.shape[0], 300), -7.0, dtype=torch.bfloat16, device=dev)
        cm = torch.full((300,), -7.0, device=dev)  # the 236 entries past the kernel's 64 stay as filled
        be.launch(masked_softmax_stats, S.to(dev), out, cm)
        outs[name] = (out.cpu().float(), cm.cpu())
    torch.testing.assert_close(outs["hopper"][1], outs["interp"][1], rtol=0, atol=0)  # maxima of the same values
    torch.testing.assert_close(outs["hopper"][0], outs["interp"][0], rtol=2 ** -7, atol=1e-5)  # expf to a few ulp, bf16


def test_a_users_kernel_over_fp8_is_refused_by_name(hopper):
    with pytest.raises(LoweringError, match="tensor X is f8e4m3"):
        hopper.lower(scale_shift, meta(50, 64, dtype=torch.float8_e4m3fn), meta(64, dtype=torch.float32),
                     meta(50, 64, dtype=torch.float32), 0.5)
