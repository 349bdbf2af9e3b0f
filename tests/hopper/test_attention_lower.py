"""Hopper attention lowering on a CPU machine: the warp-specialized IR → C++ translation of
attention_fwd compiles for sm_90a (NVRTC and nvcc), the SASS has wgmma / TMA / mbarrier / setmaxnreg,
nothing spills, `python -m tiles show` prints it and `--emit` writes a unit nvcc builds standalone,
and kernels it cannot lower are refused with a reason."""
from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import torch

nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-python (cuda.bindings.nvrtc) is not installed")

from tiles.backends.hopper import runtime  # noqa: E402
from tiles.backends.hopper.lower_attention import WarpSpecializedLowering  # noqa: E402
from tiles.core.lowering import LoweringError  # noqa: E402
from tiles.core.dtypes import f32  # noqa: E402
from tiles.core.lang import cast, load_async, mma, row_max, store, wait, zero  # noqa: E402
from tiles.core.patterns import Pipelined  # noqa: E402
from tiles.core.trace import kernel  # noqa: E402
from tiles.kernels import attention_bwd_dkdv, attention_bwd_dq, attention_bwd_fused, attention_fwd  # noqa: E402
from test_compile import assert_no_spills  # noqa: E402  (tests/hopper is on sys.path)
from sass import disassemble  # noqa: E402

try:
    runtime.nvrtc_version()
except Exception as e:
    pytest.skip(f"NVRTC is not loadable: {e}", allow_module_level=True)

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


def _lower(D=128, causal=True, dtype=torch.bfloat16, options=None, kernel="fwd", launched=False, ragged=False,
           paged=False, varlen=False, **over):
    """The lowering of one attention kernel; `launched`: with the tile sizes and schedule options the
    backend launches it with (WarpSpecializedLowering.config / SCHEDULES); `ragged`: the forward reading
    each sequence's key count from a tensor (KLen); `varlen`: packed sequences (a table of their blocks,
    api._blocks), with the options the backend's schedule leaves them."""
    if launched:
        name = {"fwd": "attention_fwd", "dq": "attention_bwd_dq", "dkdv": "attention_bwd_dkdv",
                "fused": "attention_bwd_fused"}[kernel]
        over = {**WarpSpecializedLowering.config(name, D=D), **over}
        options = options or WarpSpecializedLowering.SCHEDULES.get((name, D))
    q = _meta(2, 1000, 16, D, dtype=dtype)
    kv = _meta(2, 1000, 4, D, dtype=dtype)
    lse = _meta(2, 16, 1000, dtype=torch.float32)
    if varlen and kernel in ("dq", "dkdv"):  # the packed backward: three sequences in 1000 rows, the longest 512
        q, kv = _meta(1, 1000, 16, D, dtype=dtype), _meta(1, 1000, 4, D, dtype=dtype)
        L, delta = _meta(3, 16, 512, dtype=torch.float32), _meta(1, 16, 1000, dtype=torch.float32)
        extra = (_meta(20, 6, dtype=torch.int32),) if kernel == "dq" else (_meta(12, 6, dtype=torch.int32),)
        args = (q, kv, kv, q, L, delta) + ((q,) if kernel == "dq" else (kv, kv)) + (D ** -0.5,) + extra
        name = f"attention_bwd_{kernel}"
        if launched:
            options = WarpSpecializedLowering.schedule(name, D, args, causal)
        k = (attention_bwd_dq if kernel == "dq" else attention_bwd_dkdv).trace(*args, causal=causal, D=D, **over)
    elif kernel == "dkdv":
        k = attention_bwd_dkdv.trace(q, kv, kv, q, lse, lse, kv, kv, D ** -0.5, causal=causal, D=D, **over)
    elif kernel == "fused":
        acc = _meta(2, 1000, 16, D, dtype=torch.float32)
        k = attention_bwd_fused.trace(q, kv, kv, q, lse, lse, kv, kv, acc, D ** -0.5, causal=causal, D=D, **over)
    elif kernel == "dq":
        k = attention_bwd_dq.trace(q, kv, kv, q, lse, lse, q, D ** -0.5, causal=causal, D=D, **over)
    elif varlen:  # three sequences packed in 1000 rows, the longest 512: a table of 10 query blocks
        blocks = _meta(10, 6, dtype=torch.int32)
        kv = _meta(1, 1000, 4, D, dtype=dtype)
        cache = (None, None, blocks)
        if paged:  # their keys in a paged cache: a pool of 40 pages of 256 keys, 8 pages a sequence
            kv, cache = _meta(40, 256, 4, D, dtype=dtype), (None, _meta(3, 8, dtype=torch.int32), blocks)
        args = (_meta(1, 1000, 16, D, dtype=dtype), kv, kv, _meta(1, 1000, 16, D, dtype=dtype),
                _meta(3, 16, 512, dtype=torch.float32), D ** -0.5) + cache
        if launched:
            options = WarpSpecializedLowering.schedule("attention_fwd", D, args, causal)
        k = attention_fwd.trace(*args, causal=causal, D=D, **over)
    else:
        lens = (_meta(2, dtype=torch.int32),) if ragged or paged else ()
        if paged:  # a pool of 40 pages of 256 keys, 8 pages a sequence
            kv, lens = _meta(40, 256, 4, D, dtype=dtype), lens + (_meta(2, 8, dtype=torch.int32),)
        k = attention_fwd.trace(q, kv, kv, q, lse, D ** -0.5, *lens, causal=causal, D=D, **over)
    return WarpSpecializedLowering(k, **(options or {})).lower()


CASES = {
    "d128_causal": dict(D=128, causal=True),
    "d128": dict(D=128, causal=False),
    "d64_f16": dict(D=64, causal=False, dtype=torch.float16),
    "d64_causal_3stages": dict(D=64, causal=True, options={"stages": 3}),
    "d64_not_persistent": dict(D=64, causal=True, options={"persistent": False}),
    "d128_no_turns": dict(D=128, causal=False, options={"pingpong": False}),
    # attention_bwd_dkdv: score tiles held transposed (Sᵀ = K Qᵀ), dV/dK from register A operands
    "dkdv_d128_causal": dict(D=128, causal=True, kernel="dkdv"),
    "dkdv_d128": dict(D=128, causal=False, kernel="dkdv"),
    "dkdv_d64_causal": dict(D=64, causal=True, kernel="dkdv"),
    "dkdv_d64_f16_not_persistent": dict(D=64, causal=False, dtype=torch.float16, kernel="dkdv",
                                        options={"persistent": False}),
    "dkdv_d128_no_rotation": dict(D=128, causal=True, kernel="dkdv", options={"rotate": False}),
    # as the backend launches them: dQ with two consumer warpgroups (taking turns at D = 128),
    # dK/dV at D = 64 with turns, the forward at D = 64 with three consumers
    "dq_d128_causal_launched": dict(D=128, causal=True, kernel="dq", launched=True),
    "dq_d64_launched": dict(D=64, causal=False, kernel="dq", launched=True),
    "dkdv_d64_launched": dict(D=64, causal=True, kernel="dkdv", launched=True),
    "fwd_d64_launched": dict(D=64, causal=False, launched=True),
    # dK, dV and dQ in one pass: dS through shared memory, dQᵀ = Kᵀ dSᵀ (A transposed from shared
    # memory), added into dQacc by TMA reduce
    "fused_d128_causal_launched": dict(D=128, causal=True, kernel="fused", launched=True),
    # a KV cache of ragged lengths: each program reads its sequence's key count (KLen[b]) once
    "fwd_d128_causal_ragged_launched": dict(D=128, causal=True, launched=True, ragged=True),
    "fwd_d64_ragged_split": dict(D=64, causal=False, launched=True, ragged=True,
                                 options={"split_tail": True, "tma_store": False}),
    # a paged cache: the producer reads each key block's page of the pool from the table
    "fwd_d128_causal_paged_launched": dict(D=128, causal=True, launched=True, paged=True),
    "fwd_d128_paged_split": dict(D=128, causal=False, launched=True, paged=True, options={"split_tail": True}),
    # packed sequences: each program reads its block's sequence, rows and keys from the table of blocks
    # (api._blocks), and stores O and L through windows that stop at its last row
    "fwd_d128_causal_varlen_launched": dict(D=128, causal=True, launched=True, varlen=True),
    "fwd_d64_varlen_launched": dict(D=64, causal=False, launched=True, varlen=True),
    # and over a paged cache (chunked prefill): the producer reads each key block's page from the table
    "fwd_d128_causal_varlen_paged_launched": dict(D=128, causal=True, launched=True, varlen=True, paged=True),
    "fwd_d64_varlen_paged_launched": dict(D=64, causal=False, launched=True, varlen=True, paged=True),
    # and their backward: dQ streams each sequence's keys through stopped windows and stores its own rows;
    # dK / dV take their key block from the table of key blocks
    "dq_d128_causal_varlen_launched": dict(D=128, causal=True, kernel="dq", launched=True, varlen=True),
    "dq_d64_varlen_launched": dict(D=64, causal=False, kernel="dq", launched=True, varlen=True),
    "dkdv_d128_varlen_launched": dict(D=128, causal=False, kernel="dkdv", launched=True, varlen=True),
    "dkdv_d64_causal_varlen_launched": dict(D=64, causal=True, kernel="dkdv", launched=True, varlen=True),
    # a sliding window: the loop from the window's first key block, mask_window on its left edge
    "fwd_d128_causal_window_launched": dict(D=128, causal=True, launched=True, left=1024),
    "fwd_d64_band_split": dict(D=64, causal=False, launched=True, left=256, right=128,
                               options={"split_tail": True, "tma_store": False, "window": False}),
    # and its backward: dQ's loop from the window's first key block, dK / dV's query loop to the last query
    # block that sees the key block, mask_window on the transposed scores
    "dq_d128_causal_window_launched": dict(D=128, causal=True, kernel="dq", launched=True, left=1024),
    "dkdv_d64_band_launched": dict(D=64, causal=False, kernel="dkdv", launched=True, left=256, right=64),
    "fused_d128_causal_window_launched": dict(D=128, causal=True, kernel="fused", launched=True, left=512),
}


# Cases no launch uses that spill under an older NVRTC: dK/dV without rotation (measured slower) spills
# 4 bytes under NVRTC 13.0, the H200 machine's, since session 14's descriptors (13.5: none). There
# the spill checks below are expected to fail; everywhere else they must pass.
SPILLS_BEFORE = {"dkdv_d128_no_rotation": (13, 5)}


def _spills_allowed(name) -> bool:
    return name in SPILLS_BEFORE and runtime.nvrtc_version() < SPILLS_BEFORE[name]


@pytest.fixture(scope="module", params=list(CASES))
def compiled(request):
    low = _lower(**CASES[request.param])
    return low, runtime.compile_cuda(low.source, name=low.entry + ".cu", cache=False), request.param


def test_nvrtc_compiles_without_spills(compiled, tmp_path):
    low, c, name = compiled
    try:
        assert_no_spills(c, low.entry, tmp_path)
    except AssertionError:
        if _spills_allowed(name):
            pytest.xfail(f"{name} spills under NVRTC {runtime.nvrtc_version()} (SPILLS_BEFORE)")
        raise


def test_sass_has_hopper_instructions(compiled, tmp_path):
    low, c, name = compiled
    sass = disassemble(c.cubin, tmp_path)
    D = low.kernel.constexprs["D"]
    if low.kernel.name == "attention_bwd_fused":
        assert "UTMAREDG" in sass  # cp.reduce.async.bulk.tensor: dQ added into dQacc
        assert "mma_AtB(dq, S.kt, wg_row0, S.dss[dsb], false);" in low.source  # dQᵀ = Kᵀ dSᵀ, A transposed from smem
        assert "BAR.ARV" in sass and "BAR.SYNC" in sass  # the staging handshake with the reducer warp
    if low.kernel.name in ("attention_bwd_dkdv", "attention_bwd_fused"):
        assert re.search(r"HGMMA\.64x64x16\.F32", sass)  # Sᵀ = K Qᵀ, dPᵀ = V dOᵀ (N = BM)
        assert re.search(rf"HGMMA\.64x{D}x16\.F32", sass)  # dV += Pᵀ dO, dK += dSᵀ Q (N = D)
        assert "SHFL.IDX" in sass  # LSE / Delta broadcast along the columns
    else:
        assert re.search(r"HGMMA\.64x128x16\.F32", sass)  # S = Q Kᵀ (N = BN)
    if D != 128:
        assert re.search(rf"HGMMA\.64x{D}x16\.F32", sass)  # O += P V (N = D)
    assert "UTMALDG.4D" in sass
    assert "SYNCS.ARRIVE.TRANS64" in sass and "SYNCS.PHASECHK" in sass
    assert "USETMAXREG.DEALLOC" in sass and "USETMAXREG.TRY_ALLOC" in sass
    if re.search(r"\b(LDL|STL)\b", sass) and _spills_allowed(name):
        pytest.xfail(f"{name} spills under NVRTC {runtime.nvrtc_version()} (SPILLS_BEFORE)")
    assert not re.search(r"\b(LDL|STL)\b", sass), "local memory traffic"


def test_source_is_the_ir_op_by_op():
    low = _lower(D=128, causal=True)
    src = low.source
    # every op of the pipelined loop appears as its IR comment followed by an ops.h call
    for ir_op, call in [("mma(s, q, kt, tb=True, accumulate=False)", "mma_ABt(s, S.q, wg_row0, S.kt[pos.stage], false);"),
                        ("mma(o, p, vt, accumulate=True)", "if (held >= 0) mma_AB(o, p, S.vt[held], true);"),
                        ("row_max(m_new, s, m)", "row_max_scaled<true>(m_new, s, (scale * 1.4426950408889634f), m);"),
                        ("mask_causal(s, row0=row0", "mask_causal(s, pid0 * 128 + wg_row0, kb * 128, K_shape1 - Q_shape1"),
                        ("store(L[pid2, pid1, :], alpha", "store(L + pid2 * L_stride0 + pid1 * L_stride1, L_stride2")]:
        assert f"// {ir_op}" in src, ir_op
        assert call in src, call
    # producer keeps only the loads; PingPong turns are named barriers
    assert src.count("load_async_4d(") == 3
    assert "arch::bar_sync(1 + cw, 256)" in src and "arch::bar_arrive(2 - cw, 256)" in src
    assert "mma_wait<1>(s);" in src  # S retired while the previous P V runs on
    # loop bound comes from the IR expression (causal: the key blocks the query block can see)
    assert "int_max(int_min(ceil_div(K_shape1, 128), ceil_div(pid0 * 128 + 128 + K_shape1 - Q_shape1, 128)), 0)" in src


def test_pipelined_has_no_turns():
    src = _lower(D=64, causal=False, options={"pingpong": False}).source
    assert "bar_sync(1 + cw" not in src


@kernel(overlap=Pipelined(stages=2))
def _transposed_misuse(k, Q, K, O, *, D, reduce, BM=64, BN=128):
    """o (BN x D) += pᵀ q: p is held transposed, so a row reduction of s (its source) would run
    across the warpgroups' rows (refused); with reduce=False, also a shared A operand used transposed."""
    k.grid(k.cdiv(K.shape[1], BN), 1, 1)
    kt, q = k.shared(BN, D, K.dtype), k.shared(BM, D, Q.dtype)
    s, p, o = k.reg(BM, BN, f32), k.reg(BM, BN, Q.dtype), k.reg(BN, D, f32)
    wait(load_async(kt, K[0, :, 0, :], row=k.program_id(0) * BN, col=0))
    zero(o)
    for i in k.pipeline(k.cdiv(Q.shape[1], BM)):
        wait(load_async(q, Q[0, :, 0, :], row=i * BM, col=0))
        mma(s, q, kt, tb=True, accumulate=False)
        if reduce:
            row_max(k.vec(BM, f32), s)
        cast(p, s)
        mma(o, p, q, ta=True)
        if not reduce:
            mma(o, q, q, ta=True)  # qᵀ q: A = qᵀ from shared memory
    store(O[0, :, 0, :], o, row=k.program_id(0) * BN, col=0)


def test_refuses_what_it_cannot_lower():
    q = _meta(1, 256, 1, 128)
    k = _transposed_misuse.trace(q, q, q, D=128, reduce=True)
    with pytest.raises(LoweringError, match="row_max of .*, which is held transposed"):
        WarpSpecializedLowering(k).lower()
    # a shared A operand used transposed lowers (wgmma's transpose bit for A, MN-major descriptor)
    k = _transposed_misuse.trace(q, q, q, D=128, reduce=False)
    assert re.search(r"mma_AtB\(\w+, S\.\w+\[\w+\], wg_row0, S\.\w+\[\w+\], true\);", WarpSpecializedLowering(k).lower().source)
    with pytest.raises(LoweringError, match="unknown options"):
        _lower(options={"bogus": 1})


def test_cli_show_and_emit(tmp_path):
    env = {"PYTHONPATH": str(ROOT)}
    import os
    env = {**os.environ, **env}
    p = subprocess.run([sys.executable, "-m", "tiles", "show", "attention_fwd", "--backend", "hopper"],
                       capture_output=True, text=True, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr
    assert "mma_ABt(s, S.q, wg_row0" in p.stdout
    out = tmp_path / "emit"
    p = subprocess.run([sys.executable, "-m", "tiles", "show", "attention_fwd", "--backend", "hopper", "--emit", str(out)],
                       capture_output=True, text=True, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([sys.executable, "-m", "tiles", "show", "attention_bwd_dkdv", "--backend", "hopper", "--emit",
                        str(out)], capture_output=True, text=True, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr
    srcs = [list(out.glob(f"tiles_{n}_hopper*.cu")) for n in ("attention_fwd", "attention_bwd_dkdv")]
    assert all(len(x) == 1 for x in srcs) and (out / "tiles" / "tiles.h").exists()
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    for (src,) in srcs:
        r = subprocess.run(["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-Xptxas", "-v", "-std=c++17",
                            f"-I{out}", str(src), "-o", str(tmp_path / "a.cubin")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        res = runtime.parse_ptxas(r.stderr + r.stdout)
        assert res and all(v["spill_stores"] == 0 and v["stack"] == 0 for v in res.values()), r.stderr


def _emitted_split_builds(out, tmp_path):
    """The forward's unit emitted to `out` (a split one: the kernel and its merge) builds with nvcc, neither
    function spilling."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    (src,) = out.glob("tiles_attention_fwd_hopper*.cu")
    r = subprocess.run(["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-Xptxas", "-v", "-std=c++17",
                        f"-I{out}", str(src), "-o", str(tmp_path / "a.cubin")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    res = runtime.parse_ptxas(r.stderr + r.stdout)
    assert len(res) == 2 and all(v["spill_stores"] == 0 and v["stack"] == 0 for v in res.values()), r.stderr


def test_cli_show_split_prints_the_cut_forward_and_its_merge(tmp_path):
    """`show attention_fwd --backend hopper --split`: the forward as a short grid launches it (split_tail,
    the causal example on the heavy-first walk), with its merge kernel; the emitted unit builds with nvcc
    without spills."""
    import os
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "tiles", "show", "attention_fwd", "--backend", "hopper", "--split"],
                       capture_output=True, text=True, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr
    assert "split_range(" in p.stdout and "_merge(" in p.stdout and "split_parts" in p.stdout
    out = tmp_path / "emit"
    p = subprocess.run([sys.executable, "-m", "tiles", "show", "attention_fwd", "--backend", "hopper", "--split",
                        "--emit", str(out)], capture_output=True, text=True, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr
    _emitted_split_builds(out, tmp_path)


@pytest.mark.parametrize("backend", ["interp", "hopper", "cdna"])
def test_cli_show_cache_prints_the_forward_over_a_kv_cache(backend, tmp_path):
    """`show attention_fwd --cache ragged|paged`: the IR, or the source, of the forward that reads each
    sequence's key count (and, paged, each key block's page of the pool); the paged Hopper unit emitted
    builds with nvcc without spills; --cache takes attention_fwd only."""
    import os
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = lambda *a: subprocess.run([sys.executable, "-m", "tiles", "show", *a], capture_output=True, text=True,  # noqa: E731
                                    cwd=ROOT, env=env)
    ragged, paged = (run("attention_fwd", "--backend", backend, "--cache", c) for c in ("ragged", "paged"))
    assert ragged.returncode == 0 and paged.returncode == 0, ragged.stderr + paged.stderr
    assert "seq_k" in ragged.stdout and "Pages" not in ragged.stdout
    want = {"interp": "let page = max(min(Pages[pid2, blk], K.shape0 - 1), 0)",
            "hopper": "const int page = int_max(int_min(Pages[pid2 * Pages_stride0 + blk * Pages_stride1], K_shape0 - 1), 0);",
            "cdna": "const int page = imax(imin(Pages[pid2 * Pages_stride0 + blk * Pages_stride1], K_shape0 - 1), 0);"}
    assert want[backend] in paged.stdout, paged.stdout
    bad = run("attention_bwd_dq", "--backend", backend, "--cache", "paged")
    assert bad.returncode == 2 and "--cache shows attention_fwd" in bad.stderr
    if backend != "hopper":
        return
    out = tmp_path / "emit"
    p = run("attention_fwd", "--backend", "hopper", "--cache", "paged", "--split", "--emit", str(out))
    assert p.returncode == 0, p.stderr
    _emitted_split_builds(out, tmp_path)


def test_cli_show_errors_and_the_printed_build_command(tmp_path):
    """--emit into something that is not a directory, or --arch for the interpreter: exit status 2 and one
    line. After an emit, the printed build command builds the unit as it stands."""
    import os
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    (tmp_path / "a_file").write_text("")

    def show(*argv):
        return subprocess.run([sys.executable, "-m", "tiles", "show", *argv], capture_output=True, text=True,
                              cwd=ROOT, env=env, timeout=300)
    for argv, needle in ((["gemm", "--backend", "hopper", "--emit", str(tmp_path / "a_file")], "cannot make the directory"),
                         (["gemm", "--backend", "hopper", "--emit", str(tmp_path / "a_file" / "sub")], "cannot make"),
                         (["gemm", "--arch", "gfx950"], "--arch applies to the hopper, cdna and cdna-emu backends")):
        p = show(*argv)
        assert p.returncode == 2 and needle in p.stderr and "Traceback" not in p.stderr, p.stderr
    out = tmp_path / "emit"
    p = show("gemm", "--backend", "hopper", "--emit", str(out))
    assert p.returncode == 0, p.stderr
    build = [line[len("build: "):] for line in p.stdout.splitlines() if line.startswith("build: ")]
    assert len(build) == 1 and f"-I {out}" in build[0]
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    r = subprocess.run(build[0], shell=True, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("D", [64, 128])
def test_bwd_dq_lowers_with_one_consumer(D, tmp_path):
    """attention_bwd_dq (Pipelined, BM = 64) through the same translation: one consumer warpgroup,
    its last mma (dq += dS K, A from registers) rotated; compiles for sm_90a without spills."""
    from tiles.kernels import attention_bwd_dq
    q = _meta(1, 300, 4, D)
    lse = _meta(1, 4, 300, dtype=torch.float32)
    k = attention_bwd_dq.trace(q, q, q, q, lse, lse, q, 0.1, causal=True, D=D)
    low = WarpSpecializedLowering(k).lower()
    assert low.notes["consumers"] == 1 and low.block == (256, 1, 1)
    src = low.source
    assert "load(lse, L + " in src and "mma_ABt(dp, S.do_, wg_row0, S.vt[pos.stage], false);" in src
    assert "if (held >= 0) mma_AB(dq, dsp, S.kt[held], true);" in src
    c = runtime.compile_cuda(src, name=low.entry + ".cu", cache=False)
    assert_no_spills(c, low.entry, tmp_path)  # from the cubin's own table when NVRTC's log has none
    assert "serialized" not in c.log, c.log


@pytest.mark.parametrize("D", [64, 128])
def test_bwd_dkdv_holds_scores_transposed(D):
    """attention_bwd_dkdv: Sᵀ = K Qᵀ and dPᵀ = V dOᵀ swap the mma operands, Pᵀ / dSᵀ feed dV / dK
    as register A operands, the query-indexed LSE / Delta become column vectors, the masks swap
    axes; two consumer warpgroups split the 128 keys; the heavy (low) key blocks go first."""
    q = _meta(1, 300, 4, D)
    kv = _meta(1, 300, 2, D)
    lse = _meta(1, 4, 300, dtype=torch.float32)
    k = attention_bwd_dkdv.trace(q, kv, kv, q, lse, lse, kv, kv, 0.1, causal=True, D=D)
    low = WarpSpecializedLowering(k).lower()
    assert low.notes["consumers"] == 2 and low.block == (384, 1, 1)
    src = low.source
    for line in ["rt<float, WG_ROWS, 64> s;  // rt<f32, 64x128>, held transposed (128x64)",
                 f"rt<float, WG_ROWS, {D}> dk;  // rt<f32, 128x{D}>",
                 "cv<64> lse;",
                 "mma_ABt(s, S.kt, wg_row0, S.q[pos.stage], false);",
                 "mma_ABt(dp, S.vt, wg_row0, S.do_[pos.stage], false);",
                 "mma_AB(dv, p, S.do_[pos.stage], true);",
                 "if (held >= 0) mma_AB(dk, dsp, S.q[held], true);",
                 "mask_rows(s, pid0 * 128 + wg_row0, K_shape1, -INFINITY);",
                 "mask_causal_transposed(s, kb * 64, pid0 * 128 + wg_row0, K_shape1 - Q_shape1, -INFINITY);",
                 "mask_cols(s, kb * 64, Q_shape1, 0.0f);",
                 "exp2_scaled_col(s, s, (scale * 1.4426950408889634f), lse);", "sub_col(dp, dp, delta);",
                 "(pid1 * (Q_shape2 / K_shape2) + i) * L_stride1",  # compound view index in parentheses
                 "const int pid0 = slot & 1 ? grid0 - 1 - level : level"]:  # key block 0 (most query blocks) first
        assert line in src, line
    # the one-shot K/V tiles are waited for both, and released after the loop over the group's heads
    assert "wait(S.once[0], it & 1);\n      wait(S.once[1], it & 1);" in src
    assert src.index("release(S.once_empty[0])") > src.rindex("mma_wait<0>(dk);")
    if D == 64:  # registers allow dP = V dOᵀ to be issued right after Sᵀ (it runs under the softmax)
        assert "[hoisted:" in src and "mma_wait<2>(s);" in src
    else:  # D = 128: dK / dV take 128 registers; hoisting too would spill
        assert "[hoisted:" not in src and "mma_wait<1>(s);" in src


@pytest.mark.parametrize("kernel", ["fwd", "dq", "dkdv", "fused", "fwd_ragged", "fwd_paged"])
@pytest.mark.parametrize("options", [None, {"split_tail": True}], ids=["plain", "split"])
def test_signature_holds_what_the_code_reads_in_the_launch_order(kernel, options):
    """Sizes and strides no statement reads (those of tensors that only TMA maps read, a head_dim fixed
    at trace time) are left out of the kernel's parameters and of the launch's arguments alike: the
    signature and Lowered.args stay the same list, in the same order, and every size left is read."""
    import re
    if options and not kernel.startswith("fwd"):
        pytest.skip("the split tail is the forward's")
    ragged, paged = kernel in ("fwd_ragged", "fwd_paged"), kernel == "fwd_paged"
    low = _lower(D=128, causal=False, kernel=kernel.split("_")[0], launched=True, ragged=ragged, paged=paged,
                 **({"options": {**options, "peel": True}} if options else {}))
    assert ("const int* __restrict__ KLen" in low.source) == ragged
    assert ("const int* __restrict__ Pages" in low.source) == paged
    # the ring stage a sequence ends in: K and V rows past its count zeroed by each consumer warpgroup
    assert ("zero_rows(S.vt[pos.stage], seq_k - (kb * 128), wg_thread(), 128);" in low.source) == (ragged and not paged)
    if paged:  # the page of each key block, read once an iteration by the producer, named in its loads
        assert "const int page = int_max(int_min(Pages[pid2 * Pages_stride0 + blk * Pages_stride1], K_shape0 - 1), 0);" \
            in low.source
        assert "load_async_4d(S.vt[pos.stage], map_V, S.ring.full[pos.stage], 0, pid1 / (Q_shape2 / K_shape2), " \
            "kb * 128 - first, page);" in low.source
        assert "zero_rows(S.vt[pos.stage], int_max(seq_k - first, 0) - (kb * 128 - first), wg_thread(), 128);" in low.source
    head = low.source.split(f"{low.entry}(", 1)[1].split(") {", 1)[0]
    params = [p.strip().split()[-1] for p in head.split(",\n")]
    names = {"tma": lambda a: a[1], "tma_vec": lambda a: a[1], "ptr": lambda a: a[1].name,
             "dim": lambda a: a[1].name.replace(".", "_"), "stride64": lambda a: a[1].name.replace(".", "_"),
             "f32": lambda a: a[1].name, "split_ws": lambda a: "split_ws", "split_whole": lambda a: "split_whole",
             "split_parts": lambda a: "split_parts"}
    assert params == [names[a[0]](a) for a in low.args]
    body = low.source.split(") {", 1)[1]
    for p in params:
        if re.fullmatch(r"\w+_(shape|stride)\d", p):
            assert re.search(rf"\b{p}\b", body), f"{p} is a parameter nothing reads"
    assert "int Q_shape3" not in low.source  # head_dim: the constexpr D


@pytest.mark.parametrize("D,causal", [(128, False), (128, True), (64, False)])
def test_packed_sequences_store_from_registers_within_their_rows(D, causal):
    """Packed sequences (a table of their blocks): O and L go through windows that stop at the sequence's
    last row, which a TMA box (tma_store, ring_store) and the split tail's merge would write past; the
    schedule leaves those out, and asking for them is refused by name. The register stores take the stop as
    their extent. The table comes heaviest first, so the grid is walked in order (not reversed)."""
    args = (_meta(1, 1000, 16, D), _meta(1, 1000, 4, D), _meta(1, 1000, 4, D), _meta(1, 1000, 16, D),
            _meta(3, 16, 512, dtype=torch.float32), D ** -0.5, None, None, _meta(10, 6, dtype=torch.int32))
    opts = WarpSpecializedLowering.schedule("attention_fwd", D, args, causal) or {}
    assert not {"tma_store", "ring_store", "split_tail"} & set(opts), opts
    assert opts.get("reverse") is False
    low = _lower(D=D, causal=causal, launched=True, varlen=True)
    assert "int_min(q0 + seq_q, O_shape1), O_shape3, o, q0 + " in low.source
    assert "store(L + (b) * L_stride0 + pid1 * L_stride1, L_stride2, int_min(seq_q, L_shape2), " in low.source
    assert "Blocks[pid0 * Blocks_stride0 + 5 * Blocks_stride1]" in low.source  # the block's first row
    assert "const int pid0 = prog % grid0" in low.source  # in the table's order
    k = attention_fwd.trace(*args, causal=causal, D=D)
    for option, why in (("ring_store", "option ring_store: O\\[0, :q0 \\+ seq_q, pid1, :\\] stops short"),
                        ("split_tail", "option split_tail: O's window stops short")):
        with pytest.raises(LoweringError, match=why):
            WarpSpecializedLowering(k, **{**opts, "peel": True, option: True}).lower()
