"""The run-time stub on a machine without ROCm, and the flattened (hiprtc) source."""
from __future__ import annotations

import re

import pytest

from tiles.backends.cdna import compile as cc
from tiles.backends.cdna import runtime
from tiles.backends.cdna.gemm_probe import render_gemm

from .conftest import need_clang


def test_available_says_why_not():
    ok, why = runtime.available()
    if ok:
        pytest.skip(f"a ROCm device is present: {why}")
    # hip-python present: its dlopen failure; absent: says so
    assert "failed to dlopen" in why or "hip-python not installed" in why or "no AMD GPU" in why, why


def test_flatten_is_self_contained():
    src = runtime.flatten(render_gemm("gfx950"))
    assert not re.search(r'#\s*include\s+"tiles/', src)
    assert src.count("// ---- begin tiles/arch.h") == 1  # each header once
    assert "#pragma once" not in src


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_flattened_source_compiles_like_hiprtc_would_see_it(arch):
    need_clang(22)
    hdr, why = cc.hiprtc_header()
    if hdr is None:
        pytest.skip(f"hiprtc_runtime.h unavailable: {why}")
    flat = runtime.flatten(render_gemm(arch))
    r = cc.compile_hip(flat, arch, 22, hiprtc=True)
    assert r.resources["vgpr_spill"] == 0 and r.count("v_mfma") == 32


def test_kernel_argument_packing():
    import ctypes

    packed = runtime.Kernel.pack([1, 2.5, 0x7F0000000000, ctypes.c_uint(3)])
    assert [type(p) for p in packed] == [ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_uint]
    with pytest.raises(TypeError):
        runtime.Kernel.pack(["x"])
