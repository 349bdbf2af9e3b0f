"""Shared helpers for the CDNA tests: compilers (skipped with the reason when absent), a per-session cache
of compiled GEMMs, and the host build of the CPU emulator (tests/cdna/emu)."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile

import pytest

from tiles.backends.cdna import compile as cc
from tiles.backends.cdna.gemm_probe import INCLUDE_DIR, render_gemm

HERE = os.path.dirname(os.path.abspath(__file__))
_WORK = tempfile.TemporaryDirectory(prefix="tiles_cdna_tests_")  # host builds; removed at interpreter exit
EMU_DIR = os.path.join(HERE, "emu")

# (arch, clang) pairs the toolchain README says work
TOOLCHAINS = [("gfx942", 22), ("gfx942", 19), ("gfx950", 22)]


def need_clang(version: int):
    if cc.toolchain(version) is None:
        pytest.skip(cc.missing_reason(version))


@functools.lru_cache(maxsize=None)
def compiled_gemm(arch: str, clang: int, dtype_in: str = "bf16", dtype_out: str = "f32", asm: bool = False, **cfg):
    """(source, CompileResult) of a rendered GEMM, compiled once per session."""
    src = render_gemm(arch, dtype_in, dtype_out, **dict(cfg))
    return src, cc.compile_hip(src, arch, clang, asm=asm)


def host_cxx():
    """A clang++ that can build the emulator (it needs clang's ext_vector_type and _Float16 on x86)."""
    for v in (22, 19):
        p = shutil.which(f"clang++-{v}")
        if p:
            return p
    pytest.skip("no clang++-22 / clang++-19 for the host emulator build " + cc.missing_reason(22))


def build_host(source: str, emu_arch: int, defines=(), main: str = "", name: str = "emu") -> str:
    """Compile `source` (a rendered kernel, or any code using the tiles headers) as host C++ with the
    emulated arch layer; with `main`, that file is the translation unit and includes the source."""
    work = tempfile.mkdtemp(prefix="emu_", dir=_WORK.name)
    src = os.path.join(work, "kernel.hip")
    with open(src, "w") as f:
        f.write(source)
    exe = os.path.join(work, name)
    cmd = [host_cxx(), "-x", "c++", "-std=c++20", "-O1", "-w", "-DTILES_EMU", f"-DTILES_EMU_ARCH={emu_arch}",
           '-DTILES_ARCH_OVERRIDE="tiles_arch_emu.h"', "-I", EMU_DIR, "-I", INCLUDE_DIR, f'-DKERNEL_SRC="{src}"']
    if emu_arch == 950:
        cmd.append("-D__gfx950__")  # selects the gfx950 paths of load.h (direct-to-LDS loads)
    cmd += [f"-D{d}" for d in defines]
    cmd += [main or src, "-o", exe]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise AssertionError("host build of the emulated kernel failed:\n" + r.stderr[-4000:])
    return exe


def run(exe: str, *args) -> str:
    r = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise AssertionError(f"{exe} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r.stdout
