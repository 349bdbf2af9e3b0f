"""backend="cdna-emu": the CDNA backend's kernels, unchanged, on an NVIDIA GPU through the emulated arch
layer (tiles/backends/cdna_emu/include/tiles_emu/arch.h).

On the CPU: every kernel the CDNA backend lowers compiles for sm_90a through NVRTC with the emulated
layer, for both targets, and `tiles show --backend cdna-emu --emit` writes a translation unit nvcc
compiles. On an NVIDIA GPU: planted bugs (a wrong MFMA layout entry, missing s_waitcnt, an unbalanced
ping-pong barrier) make the emulated run fail, and the unplanted kernels pass. The portability suite
(tests/portability) runs every kernel through cdna-emu for both targets on the GPU.
"""
import math
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch

from tiles import backends
from tiles.__main__ import _examples
from tiles.kernels import SUITE

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "portability"))
from reference import attention_ref, check_attention_fwd, f32_sum_bound, fl, max_err  # noqa: E402

ARCHES = ("gfx942", "gfx950")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPU = torch.cuda.is_available() and getattr(torch.version, "hip", None) is None
needs_gpu = pytest.mark.skipif(not GPU, reason="needs an NVIDIA GPU to run the emulated CDNA kernels on")


def _emu(arch):
    return backends.get(f"cdna-emu:{arch}")


def _lowered(arch, name):
    be = _emu(arch)
    a, kw = _examples()[name]
    return be, be.lower(SUITE[name], *a, **dict(kw, **be.config(name, **kw)))


# ------------------------------------------------------------------ CPU: the emulated sources compile


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("name", sorted(SUITE))
def test_emulated_source_compiles_for_sm90a(arch, name):
    pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC (cuda-python) compiles the emulated sources")
    be = _emu(arch)
    if not be.supports(name):
        pytest.skip(f"the CDNA backend does not lower {name}")
    be, lowered = _lowered(arch, name)
    assert lowered.source.startswith("// tiles cdna-emu") and f"#define __{arch}__ 1" in lowered.source
    compiled = be.compile(lowered)
    assert compiled.cubin[:4] == b"\x7fELF"
    # the kernel body is the CDNA backend's own output, byte for byte
    cdna = backends.get("cdna")
    a, kw = _examples()[name]
    assert lowered.source.endswith(cdna.lower(SUITE[name], *a, arch=arch, **dict(kw, **cdna.config(name, arch, **kw))).source)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("arch,name", [("gfx942", "gemm"), ("gfx950", "attention_fwd")])
def test_emitted_translation_unit_compiles_with_nvcc(tmp_path, arch, name):
    out = subprocess.run([sys.executable, "-m", "tiles", "show", name, "--backend", "cdna-emu", "--arch", arch,
                          "--emit", str(tmp_path)], capture_output=True, text=True, check=True, cwd=ROOT).stdout.split()
    src = [p for p in out if p.endswith(".cu")][0]
    assert (tmp_path / "tiles" / "arch.h").exists() and (tmp_path / "tiles_emu" / "arch.h").exists()
    r = subprocess.run(["nvcc", "-arch=sm_90a", "-std=c++17", "-I", str(tmp_path), "-c", src, "-o", str(tmp_path / "k.o")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]


def test_backend_names_and_absence_reason():
    assert _emu("gfx942") is backends.get("cdna-emu")
    assert backends.get("cdna-emu:gfx950").name == "cdna-emu:gfx950"
    with pytest.raises(ValueError, match="cdna-emu:gfx950"):
        backends.get("cdna-emu:gfx90a")
    ok, why = backends.get("cdna-emu").available()
    if not GPU:
        assert not ok and "NVIDIA GPU" in why
    else:
        assert ok and "not timing" in why


# ------------------------------------------------------------------ GPU: planted bugs fail


def _run_source(be, lowered, grid, argv, patch=None):
    """Compile the flattened source, with `patch(text) -> text` applied, and run it."""
    from tiles.backends.cdna_emu.backend import run
    from tiles.backends.hopper import runtime as cuda_runtime

    text = be.flat_source(lowered)
    if patch is not None:
        patched = patch(text)
        assert patched != text, "the planted bug did not change the source"
        text = patched
    kern = cuda_runtime.load(cuda_runtime.compile_cuda(text, name=lowered.entry + ".cu").cubin, lowered.entry)
    run(kern, grid, lowered.block, argv, be.target)
    torch.cuda.synchronize()


def _gemm(arch, patch=None) -> bool:
    """Whether the emulated GEMM (with `patch` planted) passes the correctness rule."""
    be = _emu(arch)
    g = torch.Generator().manual_seed(1)
    M, N, K = 256, 256, 128
    a = torch.randn(M, K, generator=g).to(torch.bfloat16).cuda()
    b = torch.randn(K, N, generator=g).to(torch.bfloat16).cuda()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float32)
    lowered, grid, argv = be.prepare(SUITE["gemm"], a, b, c, arch=arch)
    _run_source(be, lowered, grid, argv, patch)
    return max_err(c, a.double() @ b.double()) <= f32_sum_bound(a, b)  # TESTING.md's rule for an f32 output


def _attention(arch, patch=None) -> bool:
    """Whether the emulated causal attention forward (with `patch` planted) passes the correctness rule."""
    be = _emu(arch)
    g = torch.Generator().manual_seed(2)
    B, S, H, D = 1, 256, 2, 128
    q, k, v = (torch.randn(B, S, H, D, generator=g).to(torch.bfloat16).cuda() for _ in range(3))
    o = torch.full_like(q, float("nan"))
    lse = torch.empty(B, H, S, device="cuda", dtype=torch.float32)
    scale = 1 / math.sqrt(D)
    lowered, grid, argv = be.prepare(SUITE["attention_fwd"], q, k, v, o, lse, scale, causal=True, D=D, arch=arch)
    _run_source(be, lowered, grid, argv, patch)
    try:
        check_attention_fwd(o, lse, q, k, v, True, scale)  # TESTING.md's rule, against float64
    except AssertionError:
        return False
    return True


def _swap_rows(text):
    # rt.h's accumulator layout table (register r of lane l holds row ...): swap rows pairwise in both bases
    for entry, wrong in (("return 8 * (r / 4) + 4 * (lane / 32) + r % 4;", "return 8 * (r / 4) + 4 * (lane / 32) + (r % 4 ^ 1);"),
                         ("return 4 * (lane / 16) + r;", "return 4 * (lane / 16) + (r ^ 1);")):
        assert entry in text, f"rt.h's layout entry changed: {entry}"
        text = text.replace(entry, wrong)
    return text


def _drop_loop_waits(text):
    # every s_waitcnt vmcnt inside the main loop: the loads of the next tile are read before they land
    head, sep, loop = text.partition("for (int kb = 0;")
    return head + sep + re.sub(r"arch::wait_vmcnt<\d+>\(\);", "", loop)


def _unbalance(text):
    return text.replace("if (g == 0) arch::barrier();", "")


@needs_gpu
@pytest.mark.parametrize("arch", ARCHES)
def test_unplanted_kernels_pass(arch):
    assert _gemm(arch)
    assert _attention(arch)


@needs_gpu
@pytest.mark.parametrize("arch", ARCHES)
def test_wrong_mfma_layout_entry_fails(arch):
    assert not _gemm(arch, _swap_rows)
    assert not _attention(arch, _swap_rows)


@needs_gpu
@pytest.mark.parametrize("arch", ARCHES)
def test_missing_waitcnt_fails(arch):
    assert not _attention(arch, _drop_loop_waits)  # NaN (poison) fails the rule too


@needs_gpu
@pytest.mark.parametrize("arch", ARCHES)
def test_unbalanced_pingpong_barrier_fails(arch):
    from tiles.backends.cdna_emu.backend import EmulationError

    with pytest.raises(EmulationError, match="unbalanced"):
        _attention(arch, _unbalance)


# ------------------------------------------------------------------ a short grid cut along the keys (split.h)


@pytest.mark.parametrize("arch", ARCHES)
def test_split_source_compiles_for_sm90a(arch):
    """The parts of a short attention grid and their merge (one translation unit) compile emulated."""
    pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC (cuda-python) compiles the emulated sources")
    be = _emu(arch)
    q, o = torch.empty(1, 8, 1, 64, dtype=torch.bfloat16), torch.empty(1, 8, 1, 64)
    k = torch.empty(1, 2048, 1, 64, dtype=torch.bfloat16)
    low = be.lower(SUITE["attention_fwd"], q, k, k, o, torch.empty(1, 1, 8), 0.125, causal=False, D=64,
                   split="bf16", **be.config("attention_fwd", D=64))
    assert low.entry.endswith("_split") and f"void {low.notes['split']['merge']}(" in low.source
    assert be.compile(low).cubin[:4] == b"\x7fELF"


@needs_gpu
@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("causal", [False, True])
def test_decode_is_cut_along_the_keys(arch, causal, monkeypatch):
    """Decode through tiles.attention: MQA's 8 query heads as the rows of one program, 2100 keys (17 key
    blocks at D = 64), so the launcher cuts the one program into parts and merges them. Output and LSE
    against float64; the launch was cut. Two query rows (causal) go through the grouped call and the
    api's own merge as well."""
    import tiles
    from tiles import api
    from tiles.backends.cdna.backend import CDNABackend

    cut = []
    plan = CDNABackend.short_grid_parts
    monkeypatch.setattr(CDNABackend, "short_grid_parts", lambda *a: cut.append(plan(*a)) or cut[-1])
    monkeypatch.setattr(api, "GROUPED_CAUSAL_KEYS", 8)
    g = torch.Generator().manual_seed(11)
    Sq = 2 if causal else 1
    q = torch.randn(1, Sq, 8, 64, generator=g).to(torch.bfloat16).cuda()
    k, v = (torch.randn(1, 2100, 1, 64, generator=g).to(torch.bfloat16).cuda() for _ in range(2))
    out, lse = tiles.attention(q, k, v, causal=causal, backend=f"cdna-emu:{arch}", return_lse=True)
    check_attention_fwd(out, lse, q, k, v, causal, 64 ** -0.5)
    assert cut[0] > 1, cut  # the grouped call (one program over 17 key blocks) was cut
    # the backward reads the merged LSE: dq, dk, dv by TESTING.md's rule against float64
    do = torch.randn(q.shape, generator=g).to(torch.bfloat16).cuda()
    grads = {}
    for kind in ("tiles", "ref", "lp"):
        dt = torch.float64 if kind == "ref" else torch.bfloat16
        xs = [x.detach().to(dt).requires_grad_() for x in (q, k, v)]
        if kind == "tiles":
            o = tiles.attention(*xs, causal=causal, backend=f"cdna-emu:{arch}")
        else:
            o = attention_ref(*xs, causal, 64 ** -0.5, dtype=dt)[0]
        (o * do.to(o.dtype)).sum().backward()
        grads[kind] = [x.grad for x in xs]
    for i, n in enumerate("qkv"):
        e, e_lp = max_err(grads["tiles"][i], grads["ref"][i]), max_err(grads["lp"][i], grads["ref"][i])
        assert e <= 3 * e_lp + fl(grads["ref"][i]), (n, e, e_lp)
