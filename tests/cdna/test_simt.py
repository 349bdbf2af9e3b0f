"""The generic CDNA lowering of tile kernels without mma (lower_simt.py + include/tiles/simt.h).

Compiled for gfx942 (clang-22, clang-19) and gfx950 (clang-22), plain and hiprtc-style, with the ISA read
back (buffer loads/stores, no scratch, no spills); and run on the CPU through the emulated arch layer
(tests/cdna/emu), every program of the grid, against float64 references (layernorm, rotary,
attention_bwd_prep) or the reference interpreter (a kernel written here that uses the rest of the
vocabulary: column reductions, masks, fill_where, loops, scalar arguments, bf16 tiles)."""
from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile

import pytest
import torch

from tiles import backends
from tiles.backends.cdna import compile as cc
from tiles.backends.cdna.lower_simt import SimtLowering, choose_layout
from tiles.core import interp, ir
from tiles.core.lowering import LoweringError
from tiles.kernels import SUITE

from .conftest import _WORK, TOOLCHAINS, build_host, need_clang, run

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "portability"))
from reference import fl, max_err  # noqa: E402


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


def _pow2(n):
    return 1 << max(0, (n - 1).bit_length())


def ln_config(N):
    NP = _pow2(N)
    return dict(NP=NP, BM=max(1, min(16, 16384 // NP)))  # what tiles.layernorm passes


# ---------------------------------------------------------------- running a lowered kernel in the emulator


def _c_float(x: float) -> str:
    if math.isinf(x):
        return "INFINITY" if x > 0 else "-INFINITY"
    return f"{float(x).hex()}f" if x == x else "NAN"


def emulate(kfn, args: tuple, kwargs: dict, arch: str = "gfx942", **layout):
    """Lower kfn(*args, **kwargs) for `arch`, run every program of its grid on the CPU emulator with the CPU
    tensors in `args` (strided views allowed), and write the results back into them in place."""
    k = kfn.trace(*args, **kwargs)
    low = SimtLowering(k, arch, **layout).lower()
    bound = kfn.bind(*args, **kwargs)
    env = kfn.runtime_env(k, bound)
    tensors = {p.name: bound.arguments[p.name] for p in k.params}
    grid = [int(ir.evaluate(g, env)) for g in k.grid]
    work = tempfile.mkdtemp(prefix="simt_", dir=_WORK.name)
    files, decls, reads, writes, argv = {}, [], [], [], []
    for i, p in enumerate(k.params):
        t = tensors[p.name]
        st = t.untyped_storage()
        raw = bytes(st)
        path = os.path.join(work, f"{p.name}.bin")
        with open(path, "wb") as f:
            f.write(raw)
        files[p.name] = path
        decls.append(f"static std::vector<unsigned char> buf{i}({max(len(raw), 1)});")
        reads.append(f'  {{ FILE* f = fopen("{path}", "rb"); if ({len(raw)}) fread(buf{i}.data(), 1, {len(raw)}, f); fclose(f); }}')
        writes.append(f'  {{ FILE* f = fopen("{path}", "wb"); fwrite(buf{i}.data(), 1, {len(raw)}, f); fclose(f); }}')
    for kind, x in low.args:
        if kind == "ptr":
            i = k.params.index(x)
            off = tensors[x.name].storage_offset() * tensors[x.name].element_size()
            argv.append(f"(void*)(buf{i}.data() + {off})")
        elif kind in ("dim", "stride"):
            argv.append(str(int(env[x.name])))
        else:
            argv.append(_c_float(float(env[x.name])))
    driver = "\n".join([
        "#include <cstdio>", "#include <vector>", "#include KERNEL_SRC", *decls,
        f"static void body() {{ {low.entry}({', '.join(argv)}); }}",
        "int main() {", *reads,
        f"  for (unsigned z = 0; z < {grid[2]}u; ++z) for (unsigned y = 0; y < {grid[1]}u; ++y)",
        f"    for (unsigned x = 0; x < {grid[0]}u; ++x) tiles::emu::run_block(x, {low.block[0]}, body, y, z);",
        *writes, '  printf("ok\\n");', "  return 0;", "}", ""])
    main = os.path.join(work, "driver.cpp")
    with open(main, "w") as f:
        f.write(driver)
    exe = build_host(low.source, 950 if arch == "gfx950" else 942, main=main)
    assert run(exe).strip() == "ok"
    for p in k.params:
        t = tensors[p.name]
        data = bytearray(open(files[p.name], "rb").read())
        if not data:
            continue
        back = torch.frombuffer(data, dtype=t.dtype)
        t.untyped_storage().copy_(back.untyped_storage())
    return low


# ---------------------------------------------------------------- suite kernels in emulation vs float64


LN_CASES = [  # (rows, N, dtype, arch): rows not a multiple of BM, N not a power of two, N below a chunk
    (37, 300, torch.bfloat16, "gfx942"),
    (5, 1000, torch.float16, "gfx950"),
    (3, 5, torch.float32, "gfx942"),
    (2, 4097, torch.bfloat16, "gfx950"),  # a row over 8 waves: the cross-wave LDS reduction
    (19, 64, torch.float32, "gfx950"),
]


@pytest.mark.parametrize("M,N,dtype,arch", LN_CASES, ids=lambda v: str(v).replace("torch.", ""))
def test_layernorm_emulated(M, N, dtype, arch):
    g = torch.Generator().manual_seed(M * 31 + N)
    x = (torch.randn(M, N, generator=g) * 3 + 1).to(dtype)
    w = torch.randn(N, generator=g).to(dtype)
    b = torch.randn(N, generator=g).to(dtype)
    y = torch.full((M, N), float("nan"), dtype=dtype)
    emulate(SUITE["layernorm"], (x, w, b, y, 1e-5), ln_config(N), arch)
    ref = torch.nn.functional.layer_norm(x.double(), (N,), w.double(), b.double(), 1e-5)
    torch.testing.assert_close(y, ref.to(dtype))


def test_layernorm_strided_rows_emulated():
    """Rows of x and y inside wider buffers (row stride 1003, odd: 16-byte chunks are misaligned, so the
    element path runs); the padding columns of y stay untouched."""
    M, N = 21, 200
    g = torch.Generator().manual_seed(7)
    xb = torch.randn(M, 1003, generator=g).to(torch.bfloat16)
    x = xb[:, 3:3 + N]
    w, b = torch.randn(N, generator=g).to(torch.bfloat16), torch.randn(N, generator=g).to(torch.bfloat16)
    yb = torch.full((M, 1003), 7.0, dtype=torch.bfloat16)
    y = yb[:, 1:1 + N]
    emulate(SUITE["layernorm"], (x, w, b, y, 1e-5), ln_config(N), "gfx942")
    ref = torch.nn.functional.layer_norm(x.double(), (N,), w.double(), b.double(), 1e-5)
    torch.testing.assert_close(y, ref.to(torch.bfloat16))
    assert (yb[:, :1] == 7).all() and (yb[:, 1 + N:] == 7).all()


ROT_CASES = [  # (B, S, H, D, dtype, arch): S not a multiple of BM=64
    (2, 65, 3, 128, torch.bfloat16, "gfx942"),
    (1, 130, 2, 32, torch.float32, "gfx950"),
    (1, 7, 2, 64, torch.float16, "gfx950"),
]


@pytest.mark.parametrize("B,S,H,D,dtype,arch", ROT_CASES, ids=lambda v: str(v).replace("torch.", ""))
def test_rotary_emulated(B, S, H, D, dtype, arch):
    g = torch.Generator().manual_seed(S)
    x = torch.randn(B, S, H, D, generator=g).to(dtype)
    ang = torch.randn(S, D // 2, generator=g)
    cos, sin = ang.cos(), ang.sin()
    y = torch.full_like(x, float("nan"))
    emulate(SUITE["rotary"], (x, cos, sin, y), dict(D=D), arch)
    x1, x2 = x.double()[..., : D // 2], x.double()[..., D // 2:]
    c, s = cos.double()[None, :, None], sin.double()[None, :, None]
    ref = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)
    torch.testing.assert_close(y, ref.to(dtype))


PREP_CASES = [(2, 77, 3, 64, torch.bfloat16, "gfx942"), (1, 130, 2, 128, torch.float16, "gfx950"),
              (1, 5, 1, 64, torch.bfloat16, "gfx950")]


@pytest.mark.parametrize("B,S,H,D,dtype,arch", PREP_CASES, ids=lambda v: str(v).replace("torch.", ""))
def test_attention_bwd_prep_emulated(B, S, H, D, dtype, arch):
    g = torch.Generator().manual_seed(S + D)
    o = torch.randn(B, S, H, D, generator=g).to(dtype)
    do = torch.randn(B, S, H, D, generator=g).to(dtype)
    delta = torch.full((B, H, S), float("nan"), dtype=torch.float32)
    emulate(SUITE["attention_bwd_prep"], (o, do, delta), dict(D=D), arch)
    ref = (o.double() * do.double()).sum(-1).transpose(1, 2)
    lp = (o.float() * do.float()).sum(-1).transpose(1, 2)  # PyTorch's own f32 computation
    assert max_err(delta, ref) <= 2 * max_err(lp, ref) + fl(ref), (max_err(delta, ref), max_err(lp, ref))


# ---------------------------------------------------------------- any kernel without mma: vs the interpreter

from tiles.core import lang as tl  # noqa: E402
from tiles.core.dtypes import bf16, f32  # noqa: E402
from tiles.core.patterns import Pipelined  # noqa: E402
from tiles.core.trace import kernel  # noqa: E402


@kernel(overlap=Pipelined(stages=1))
def mixer(k, X, Y, S, C, scale, *, BM, BN, NB):
    """Per (row block, head): softmax over masked scores accumulated over NB column blocks, column sums and
    maxima, a bf16 round trip; every remaining op of OPS.md that needs no mma."""
    M, N = X.shape[1], X.shape[2]
    k.grid(k.cdiv(M, BM), X.shape[0])
    r0, h = k.program_id(0) * BM, k.program_id(1)
    x = k.reg(BM, BN, f32)
    acc = k.reg(BM, BN, f32)
    p = k.reg(BM, BN, bf16)
    t = k.reg(BM, BN, f32)
    m = k.vec(BM, f32)
    l = k.vec(BM, f32)
    cs = k.vec(BN, f32, axis="col")
    cm = k.vec(BN, f32, axis="col")
    tl.zero(acc)
    tl.fill(cm, -1.0e30)
    for j in k.range(NB):
        tl.load(x, X[h, :, :], row=r0, col=j * BN)
        tl.mul(x, x, scale)
        tl.mask_cols(x, j * BN, N)
        tl.mask_causal(x, r0, j * BN, N - M)
        tl.mask_window(x, r0, j * BN, N - M - 50)
        tl.row_max(m, x)
        tl.max(m, m, -1.0e30)
        tl.sub_row(t, x, m)
        tl.exp2(t, t)
        tl.row_sum(l, t)
        tl.div_row(t, t, l)
        tl.mask_rows(t, r0, M, 0.0)
        tl.add(acc, acc, t)
        tl.col_max(cm, x, cm)
    tl.cast(p, acc)
    tl.col_sum(cs, p)
    tl.fill_where(cs, cs, "==", 0.0, 1.0)
    tl.div_col(t, p, cs)
    tl.abs(x, t)
    tl.log2(x, x)
    tl.neg(x, x)
    tl.min(x, x, 30.0)
    tl.exp(t, t)
    tl.log(t, t)
    tl.sub_col(t, t, cs)
    tl.rsqrt(m, l)
    tl.copy(l, m)
    tl.sub(t, t, x)
    tl.div(t, t, 3.0)
    tl.store(Y[h, :, :], t, row=r0, col=0)
    tl.store(S[h, :], l, row=r0)
    tl.store(C[h, :], cm, row=0)


@pytest.mark.parametrize("arch,M,N,BM,BN,layout", [
    ("gfx942", 45, 70, 16, 32, {}),
    ("gfx950", 33, 96, 32, 64, {"threads": 256, "tpr": 128, "vec": 4}),  # rows over 2 waves
    ("gfx942", 20, 40, 8, 16, {"threads": 512, "tpr": 4, "vec": 2}),  # many row groups: cross-wave column sums
])
def test_user_kernel_matches_interpreter(arch, M, N, BM, BN, layout):
    g = torch.Generator().manual_seed(M)
    H, NB = 2, -(-N // BN)
    X = torch.randn(H, M, N, generator=g).to(torch.bfloat16)
    args = lambda: (X, torch.full((H, M, BN), float("nan")), torch.full((H, M), float("nan")),
                    torch.full((H, BN), float("nan")), 0.7)
    kw = dict(BM=BM, BN=BN, NB=NB)
    got = args()
    emulate(mixer, got, kw, arch, **layout)
    want = args()
    k = mixer.trace(*want, **kw)
    interp.run(k, {p.name: t for p, t in zip(k.params, want)}, mixer.runtime_env(k, mixer.bind(*want, **kw)), "cpu")
    for a, b in zip(got[1:4], want[1:4]):
        torch.testing.assert_close(a, b, rtol=2e-5, atol=2e-5, equal_nan=True)


@kernel(overlap=Pipelined(stages=1))
def shifted(k, X, V, Y, *, BM, BN):
    """Windows that hang over every edge: negative and past-the-end row/col offsets, a row vector read from
    a 1-D window, a strided (transposed) source; the interpreter says what reads 0 and what is dropped."""
    k.grid(k.cdiv(Y.shape[0], BM), k.cdiv(Y.shape[1], BN))
    r0, c0 = k.program_id(0) * BM, k.program_id(1) * BN
    x = k.reg(BM, BN, f32)
    v = k.vec(BM, f32)
    tl.load(x, X[:, :], row=r0 - 3, col=c0 + 5)
    tl.load(v, V[:], row=r0 - 1)
    tl.add_row(x, x, v)
    tl.store(Y[:, :], x, row=r0 + 2, col=c0 - 7)


@pytest.mark.parametrize("transposed", [False, True])
def test_edges_match_interpreter(transposed):
    g = torch.Generator().manual_seed(3)
    X = torch.randn(50, 37, generator=g).to(torch.bfloat16)
    X = X.t().contiguous().t() if transposed else X  # column stride 50: every access is an element access
    V = torch.randn(41, generator=g)
    args = lambda: (X, V, torch.full((45, 60), float("nan"), dtype=torch.float16))
    kw = dict(BM=16, BN=24)
    got = args()
    emulate(shifted, got, kw, "gfx942")
    want = args()
    k = shifted.trace(*want, **kw)
    interp.run(k, {p.name: t for p, t in zip(k.params, want)}, shifted.runtime_env(k, shifted.bind(*want, **kw)), "cpu")
    torch.testing.assert_close(got[2], want[2], equal_nan=True, rtol=0, atol=0)


def test_launch_without_rocm_raises_backend_unavailable():
    from tiles.core.backend import BackendUnavailable

    x = torch.zeros(4, 8)
    with pytest.raises(BackendUnavailable, match="cdna"):
        backends.get("cdna").launch(SUITE["layernorm"], x, x[0], x[0], x, 1e-5, NP=8, BM=4)


# ---------------------------------------------------------------- compile: ISA and resources


def suite_lowered(name, arch, dtype=torch.bfloat16):
    be = backends.get("cdna")
    if name == "layernorm":
        N = 1000
        a = (meta(4096, N, dtype=dtype), meta(N, dtype=dtype), meta(N, dtype=dtype), meta(4096, N, dtype=dtype), 1e-5)
        return be.lower(SUITE[name], *a, arch=arch, **ln_config(N))
    if name == "rotary":
        return be.lower(SUITE[name], meta(2, 1000, 16, 128, dtype=dtype), meta(1000, 64, dtype=torch.float32),
                        meta(1000, 64, dtype=torch.float32), meta(2, 1000, 16, 128, dtype=dtype), D=128, arch=arch)
    q = meta(2, 1000, 16, 128, dtype=dtype)
    return be.lower(SUITE[name], q, q, meta(2, 16, 1000, dtype=torch.float32), D=128, arch=arch)


SIMT_KERNELS = ("layernorm", "rotary", "attention_bwd_prep")


@pytest.mark.parametrize("arch,clang", TOOLCHAINS)
@pytest.mark.parametrize("name", SIMT_KERNELS)
@pytest.mark.parametrize("hiprtc", [False, True], ids=["clang", "hiprtc"])
def test_suite_kernels_compile(name, arch, clang, hiprtc):
    need_clang(clang)
    if hiprtc:
        hdr, why = cc.hiprtc_header()
        if hdr is None:
            pytest.skip(f"hiprtc_runtime.h unavailable: {why}")
    low = suite_lowered(name, arch)
    assert low.notes["lowering"] == "simt" and low.block[0] % 64 == 0
    r = cc.compile_hip(low.source, arch, clang, hiprtc=hiprtc)
    res = r.resources
    assert res["scratch"] == 0 and res["vgpr_spill"] == 0 and res["sgpr_spill"] == 0, r.summary()
    assert r.notes["private_segment_fixed_size"] == 0 and r.vgpr_total <= 512 // max(1, low.block[0] // 256)
    assert r.count("buffer_load") > 0 and r.count("buffer_store") > 0, r.summary()
    assert r.count("v_mfma") == 0 and r.count("global_load") == 0 and r.count("flat_load") == 0
    assert not any(m.startswith("s_call") for m in r.counts)  # no libm, no calls
    # 16-byte chunks where the data allow: the 16-bit inputs of every kernel here move as dwordx4
    assert r.count("buffer_load_dwordx4") > 0
    if name == "attention_bwd_prep":
        assert r.count("buffer_store_dword") > 0  # Delta is f32, one value per row
    else:
        assert r.count("buffer_store_dwordx4") > 0
    assert res["lds"] == low.notes["lds_bytes"]


def test_dtypes_compile():
    need_clang(22)
    for dt in (torch.float16, torch.float32):
        for name in SIMT_KERNELS:
            r = cc.compile_hip(suite_lowered(name, "gfx950", dt).source, "gfx950", 22)
            assert r.resources["scratch"] == 0 and r.resources["vgpr_spill"] == 0, (name, dt, r.summary())


def test_generated_code_reads_like_the_ir():
    low = suite_lowered("layernorm", "gfx950")
    src = low.source
    assert "kernel layernorm(" in src  # the IR is quoted at the top
    lines = src.splitlines()
    for op in ("row_sum(mean, x)", "mask_cols(xc, col0=0, limit=X.shape1, value=0.0)", "rsqrt(rstd, var)"):
        i = next(i for i, s in enumerate(lines) if s.strip() == f"// {op}")
        assert lines[i + 1].strip().startswith("simt::" + op.split("(")[0])
    assert "__builtin_" not in src and "#include <" not in src
    assert SimtLowering(low.kernel, "gfx950").lower().source == src  # deterministic


def test_layouts():
    # (threads, rows per group, chunk) from the shapes: one chunk slot per thread where the rows allow
    k = SUITE["layernorm"].trace(meta(64, 4097), meta(4097), meta(4097), meta(64, 4097), 1e-5, **ln_config(4097))
    assert choose_layout(k) == (1024, 512, 8)  # 2 rows of 8192: a row over 8 waves
    k = SUITE["rotary"].trace(meta(1, 9, 2, 64), meta(9, 32, dtype=torch.float32), meta(9, 32, dtype=torch.float32),
                              meta(1, 9, 2, 64), D=64)
    assert choose_layout(k) == (128, 4, 8)
    k = SUITE["layernorm"].trace(meta(3, 1), meta(1), meta(1), meta(3, 1), 1e-5, **ln_config(1))
    assert choose_layout(k) == (64, 1, 1)


def test_backend_dispatch_and_errors():
    be = backends.get("cdna")
    for name in SIMT_KERNELS + ("gemm",):
        assert be.supports(name)
    q = meta(1, 128, 4, 64)
    lse = meta(1, 4, 128, dtype=torch.float32)
    with pytest.raises(LoweringError, match="mma"):
        SimtLowering(SUITE["attention_fwd"].trace(q, q, q, q, lse, 0.125, causal=True, D=64), "gfx942")
    with pytest.raises(LoweringError, match="arch"):
        SimtLowering(SUITE["rotary"].trace(q, meta(128, 32), meta(128, 32), q, D=64), "gfx90a")


def test_show_emit_compiles_standalone(tmp_path):
    need_clang(22)
    out = tmp_path / "emit"
    r = subprocess.run([sys.executable, "-m", "tiles", "show", "layernorm", "--backend", "cdna", "--arch", "gfx950",
                        "--emit", str(out)], capture_output=True, text=True, cwd=REPO,
                       env=dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", "")))
    assert r.returncode == 0, r.stderr
    src = [line for line in r.stdout.splitlines() if line.endswith(".hip")]  # the paths written (not the build line)
    assert len(src) == 1
    tc = cc.toolchain(22)
    obj = tmp_path / "k.o"
    c = subprocess.run([tc.clang, "-x", "hip", "--offload-arch=gfx950", "--cuda-device-only", "--no-gpu-bundle-output",
                        "-nogpulib", "-nogpuinc", "-O3", "-I", str(out), "-c", src[0], "-o", str(obj)],
                       capture_output=True, text=True)
    assert c.returncode == 0, c.stderr
