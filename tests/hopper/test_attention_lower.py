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
from tiles.kernels import attention_bwd_dkdv, attention_fwd  # noqa: E402

try:
    runtime.nvrtc_version()
except Exception as e:
    pytest.skip(f"NVRTC is not loadable: {e}", allow_module_level=True)

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


def _lower(D=128, causal=True, dtype=torch.bfloat16, options=None, **over):
    q = _meta(2, 1000, 16, D, dtype=dtype)
    kv = _meta(2, 1000, 4, D, dtype=dtype)
    lse = _meta(2, 16, 1000, dtype=torch.float32)
    k = attention_fwd.trace(q, kv, kv, q, lse, D ** -0.5, causal=causal, D=D, **over)
    return WarpSpecializedLowering(k, **(options or {})).lower()


def _cuobjdump():
    for p in map(pathlib.Path, sys.path):
        c = p / "nvidia" / "cu13" / "bin" / "cuobjdump"
        if c.exists():
            return str(c)
    return shutil.which("cuobjdump")


CASES = {
    "d128_causal": dict(D=128, causal=True),
    "d128": dict(D=128, causal=False),
    "d64_f16": dict(D=64, causal=False, dtype=torch.float16),
    "d64_causal_3stages": dict(D=64, causal=True, options={"stages": 3}),
    "d64_not_persistent": dict(D=64, causal=True, options={"persistent": False}),
    "d128_no_turns": dict(D=128, causal=False, options={"pingpong": False}),
}


@pytest.fixture(scope="module", params=list(CASES))
def compiled(request):
    low = _lower(**CASES[request.param])
    return low, runtime.compile_cuda(low.source, name=low.entry + ".cu", cache=False)


def test_nvrtc_compiles_without_spills(compiled):
    low, c = compiled
    res = c.resources.get(low.entry)
    if res is None:
        pytest.skip("NVRTC returned no ptxas -v lines this time")
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0 and res["stack"] == 0, c.log
    assert "C7508" not in c.log and "serialized" not in c.log, c.log


def test_sass_has_hopper_instructions(compiled, tmp_path):
    low, c = compiled
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not found")
    f = tmp_path / "k.cubin"
    f.write_bytes(c.cubin)
    sass = subprocess.run([tool, "-sass", str(f)], check=True, capture_output=True, text=True).stdout
    D = low.kernel.constexprs["D"]
    assert re.search(r"HGMMA\.64x128x16\.F32", sass)  # S = Q Kᵀ (N = BN)
    if D != 128:
        assert re.search(rf"HGMMA\.64x{D}x16\.F32", sass)  # O += P V (N = D)
    assert "UTMALDG.4D" in sass
    assert "SYNCS.ARRIVE.TRANS64" in sass and "SYNCS.PHASECHK" in sass
    assert "USETMAXREG.DEALLOC" in sass and "USETMAXREG.TRY_ALLOC" in sass
    assert not re.search(r"\b(LDL|STL)\b", sass), "local memory traffic"


def test_source_is_the_ir_op_by_op():
    low = _lower(D=128, causal=True)
    src = low.source
    # every op of the pipelined loop appears as its IR comment followed by an ops.h call
    for ir_op, call in [("mma(s, q, kt, tb=True, accumulate=False)", "mma_ABt(s, S.q, wg_row0, S.kt[pos.stage], false);"),
                        ("mma(o, p, vt, accumulate=True)", "if (held >= 0) mma_AB(o, p, S.vt[held], true);"),
                        ("row_max(m_new, s, m)", "row_max(m_new, s, m);"),
                        ("mask_causal(s, row0=pid0 * 128", "mask_causal(s, pid0 * 128 + wg_row0, kb * 128, K_shape1 - Q_shape1"),
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


def test_refuses_what_it_cannot_lower():
    q = _meta(1, 256, 4, 64)
    lse = _meta(1, 4, 256, dtype=torch.float32)
    k = attention_bwd_dkdv.trace(q, q, q, q, lse, lse, q, q, 0.1, causal=False, D=64)
    with pytest.raises(LoweringError, match="rows|ta=True"):
        WarpSpecializedLowering(k).lower()
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
    srcs = list(out.glob("tiles_attention_fwd*.cu"))
    assert len(srcs) == 1 and (out / "tiles" / "tiles.h").exists()
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    r = subprocess.run(["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-Xptxas", "-v", "-std=c++17",
                        f"-I{out}", str(srcs[0]), "-o", str(tmp_path / "a.cubin")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    res = runtime.parse_ptxas(r.stderr + r.stdout)
    assert res and all(v["spill_stores"] == 0 and v["stack"] == 0 for v in res.values()), r.stderr


@pytest.mark.parametrize("D", [64, 128])
def test_bwd_dq_lowers_with_one_consumer(D):
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
    res = c.resources.get(low.entry)
    if res is not None:
        assert res["spill_stores"] == 0 and res["stack"] == 0, c.log
        assert "serialized" not in c.log, c.log
