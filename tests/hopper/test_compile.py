"""Hopper codegen on a CPU machine: the GEMM and probe sources compile for sm_90a through NVRTC (the
run-time path) and nvcc, the SASS has the instructions the design intends, ptxas spills nothing, and
the plain sm_90 target is rejected (wgmma/setmaxnreg need sm_90a)."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-python (cuda.bindings.nvrtc) is not installed")

from tiles.backends.hopper import gemm_probe, probe, runtime  # noqa: E402
from tiles.backends.hopper import gen_arch  # noqa: E402
from sass import disassemble, res_usage  # noqa: E402  (tests/hopper is on sys.path)

INCLUDE = runtime.INCLUDE_DIR

try:
    runtime.nvrtc_version()
except Exception as e:  # the bindings import but libnvrtc is missing
    pytest.skip(f"NVRTC is not loadable: {e}", allow_module_level=True)


CONFIGS = {
    "default_bf16": (("bf16", "bf16"), {}),  # 2-CTA cluster, B multicast, TMA-store epilogue
    "bf16_to_f32": (("bf16", "float32"), {}),
    "f16": (("f16", "f16"), {}),
    "no_cluster_regs_epilogue": (("bf16", "bf16"), {"cluster": 1, "epilogue": "regs"}),
    "b_kmajor": (("bf16", "bf16"), {"b_kmajor": True, "cluster": 1}),
    "256x128": (("bf16", "bf16"), {"BM": 256, "BN": 128, "cluster": 1, "epilogue": "regs"}),
    "regs_epilogue_wide2": (("bf16", "bf16"), {"epilogue": "regs", "wide_stores": 2}),  # ops.h store_wide
    "regs_epilogue_wide4": (("bf16", "bf16"), {"epilogue": "regs", "wide_stores": 4}),
    # the finished tile packed, stored under the next tile's first k-block
    "deferred_store": (("bf16", "bf16"), {"deferred_store": True}),
    "deferred_store_regs_wide4": (("f16", "f16"), {"BN": 64, "stages": 8, "epilogue": "regs", "wide_stores": 4,
                                                   "deferred_store": True}),
}


@pytest.fixture(scope="module", params=list(CONFIGS))
def compiled(request):
    (it, ot), over = CONFIGS[request.param]
    kern = gemm_probe.gemm_source(it, ot, **over)
    return kern, runtime.compile_cuda(kern.source, name=kern.name + ".cu", cache=False)


def assert_no_spills(c, entry: str, tmp_path) -> None:
    """No front-end warning, and zero spills and no stack for `entry`: from ptxas' -v lines, or from the cubin's own resource
    table when the log came back without them (seen on the H200 machine, NVRTC 13.0 through
    cuda-bindings 13.3, now and then)."""
    # the generated code compiles without front-end warnings (an unused variable, a narrowing, ...)
    assert "warning #" not in (c.log or ""), c.log
    res = c.resources.get(entry)
    if res is None:
        res = res_usage(c.cubin, entry, tmp_path)
        assert res["local"] == 0 and res["stack"] == 0, res
        return
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0 and res["stack"] == 0, c.log
    assert "C7508" not in c.log, "ptxas ignored setmaxnreg:\n" + c.log
    assert "serialized" not in c.log, "ptxas serialized the wgmmas:\n" + c.log


def test_nvrtc_compiles_without_spills(compiled, tmp_path):
    kern, c = compiled
    assert_no_spills(c, kern.name, tmp_path)


def test_sass_has_hopper_instructions(compiled, tmp_path):
    kern, c = compiled
    sass = disassemble(c.cubin, tmp_path)
    n = kern.cfg["BN"]
    t = "F16" if "f16_" in kern.name.split("tiles_gemm_")[1][:4] else "BF16"
    assert re.search(rf"HGMMA\.64x{n}x16\.F32(\.{t})?\b", sass), f"no HGMMA.64x{n}x16 in SASS"
    assert "UTMALDG.2D" in sass
    if kern.cfg["cluster"] > 1:
        assert "UTMALDG.2D.MULTICAST" in sass
    if kern.cfg["epilogue"] == "tma":
        assert "UTMASTG.2D" in sass
    wide = {0: "STG.E ", 2: "STG.E.64", 4: "STG.E.128"}[kern.cfg["wide_stores"]]
    if kern.cfg["epilogue"] == "regs":  # 16-bit outputs here: a pair is 4 bytes
        assert wide in sass, f"the epilogue's {wide.strip()} stores"
    assert "SYNCS.ARRIVE.TRANS64" in sass and "SYNCS.PHASECHK" in sass
    assert "USETMAXREG.DEALLOC" in sass and "USETMAXREG.TRY_ALLOC" in sass
    assert not re.search(r"\b(LDL|STL)\b", sass), "local memory traffic (spills or indexed registers)"
    # where the consumer's first store goes: after the tile's last wgmma retired (wait for none left in
    # flight), or, deferred, while the next tile's first k-block is in flight
    ins = re.findall(r"/\*[0-9a-f]{4,}\*/\s+([^;]*);", sass)
    first_mma = next(i for i, t in enumerate(ins) if "HGMMA" in t)
    store = "UTMASTG" if kern.cfg["epilogue"] == "tma" else "STG.E"
    first_store = next(i for i, t in enumerate(ins) if i > first_mma and store in t)
    drained = any("WARPGROUP.DEPBAR.LE gsb0, 0x0" in t for t in ins[first_mma:first_store])
    assert drained != kern.cfg["deferred_store"], (kern.cfg["deferred_store"], ins[first_mma:first_store])
    if kern.cfg["deferred_store"]:
        assert any("HGMMA" in t for t in ins[first_store:]), "the main loop's wgmmas follow the deferred store"


def test_nvcc_compiles_sm90a(tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    kern = gemm_probe.gemm_source("bf16", "bf16")
    src = tmp_path / "gemm.cu"
    src.write_text(kern.source)
    p = subprocess.run(["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-Xptxas", "-v", "-std=c++17",
                        f"-I{INCLUDE}", str(src), "-o", str(tmp_path / "k.cubin")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    res = runtime.parse_ptxas(p.stderr + p.stdout)[kern.name]
    assert res["spill_stores"] == 0 and res["stack"] == 0


def _dkdv_source():
    """attention_bwd_dkdv's warp-specialized lowering (wgmma, setmaxnreg)."""
    import torch
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering
    from tiles.kernels import attention_bwd_dkdv
    q = torch.empty(1, 256, 2, 64, dtype=torch.bfloat16, device="meta")
    lse = torch.empty(1, 2, 256, dtype=torch.float32, device="meta")
    return WarpSpecializedLowering(attention_bwd_dkdv.trace(q, q, q, q, lse, lse, q, q, 0.1, causal=True, D=64)).lower().source


@pytest.mark.parametrize("which", ["gemm", "attention_bwd_dkdv"])
def test_plain_sm90_is_rejected(which):
    source = gemm_probe.gemm_source("bf16", "bf16").source if which == "gemm" else _dkdv_source()
    with pytest.raises(runtime.CompileError, match=r"not supported on \.target 'sm_90'"):
        runtime.nvrtc_compile(source, arch="sm_90", name=f"{which}_sm90.cu")


def test_compile_error_carries_log():
    with pytest.raises(runtime.CompileError, match="undefined_thing"):
        runtime.nvrtc_compile('extern "C" __global__ void k() { undefined_thing(); }', name="bad.cu")


def test_probe_compiles(tmp_path):
    c = runtime.compile_cuda(probe.SOURCE, name="probe.cu", cache=False)
    assert set(c.resources) in ({"probe_acc", "probe_acc_bt", "probe_areg"}, set()), c.resources  # set(): no ptxas lines
    for entry in ("probe_acc", "probe_acc_bt", "probe_areg"):
        assert_no_spills(c, entry, tmp_path)
    sass = disassemble(c.cubin, tmp_path)
    assert "HGMMA.64x256x16.F32.BF16" in sass and "HGMMA.64x64x16.F32" in sass


def test_cache_roundtrip():
    kern = gemm_probe.gemm_source("bf16", "bf16", group_m=4)
    first = runtime.compile_cuda(kern.source, name="g.cu")
    again = runtime.compile_cuda(kern.source, name="g.cu")
    assert first.cubin == again.cubin


def test_arch_h_is_generated_and_alone_spells_ptx():
    assert gen_arch.main(["--check"]) == 0
    for h in INCLUDE.rglob("*.h"):
        if h.name != "arch.h":
            text = h.read_text()
            assert "asm" not in re.sub(r"//.*", "", text), f"{h.name} spells inline PTX; only arch.h may"
            assert "__shfl" not in text and "__builtin" not in text, f"{h.name} uses a vendor intrinsic"


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="shared memory"):
        gemm_probe.gemm_source("bf16", "bf16", stages=5)
    with pytest.raises(TypeError):
        gemm_probe.gemm_source("float32", "bf16")
    with pytest.raises(TypeError, match="unknown GEMM options"):
        gemm_probe.gemm_source("bf16", "bf16", tile=3)
    with pytest.raises(ValueError, match="deferred_store .* out_dtype float"):
        gemm_probe.gemm_source("bf16", "float32", deferred_store=True)


def test_mma_with_a_transposed_from_shared_memory_compiles(tmp_path):
    """ops.h's mma_AtB / mma_AtBt (A given K x M, wgmma's transpose bit for A) with either form of B:
    both instantiate, and the SASS has the wgmma. (The fused attention backward uses mma_AtB.)"""
    src = """#include <tiles/tiles.h>
using namespace tiles;
extern "C" __global__ void __launch_bounds__(128) k(float* out) {
  extern __shared__ unsigned char raw[];
  smem_allocator alloc(raw);
  auto& a = alloc.take<st<bf16, 64, 128>>();   // K x M
  auto& bm = alloc.take<st<bf16, 64, 64>>();   // K x N (MN-major)
  auto& bk = alloc.take<st<bf16, 64, 64>>();   // N x K (K-major)
  rt<float, 64, 64> c;
  mma_AtB(c, a, 64, bm, false);
  mma_AtBt(c, a, 0, bk, true);
  mma_commit();
  mma_wait<0>(c);
  store(out, 64, 64, 64, c, 0, 0);
}"""
    c = runtime.nvrtc_compile(src, name="at.cu")
    assert "HGMMA.64x64x16.F32.BF16" in disassemble(c.cubin, tmp_path)


def test_bounded_global_tile_access_compiles(tmp_path):
    """ops.h's bounded load / store / store_add of a register tile (one fragment walk, each_pair)
    instantiate for 16- and 32-bit elements; store_add becomes global reductions (RED) in the SASS."""
    src = """#include <tiles/tiles.h>
using namespace tiles;
extern "C" __global__ void __launch_bounds__(128) k(const bf16* x, bf16* y, float* acc, int n) {
  rt<float, 64, 64> t;
  load(t, x, 64, n, 60, 3, 0);
  store(y, 64, n, 60, t, 3, 0);
  store_add(acc, 64, n, 60, t, 0, 4);
}"""
    c = runtime.nvrtc_compile(src, name="bounded.cu")
    sass = disassemble(c.cubin, tmp_path)
    assert "RED" in sass and "LDG" in sass and "STG" in sass
