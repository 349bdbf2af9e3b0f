"""backend="cdna-emu": the kernels the CDNA backend generates, unchanged, run on an NVIDIA GPU.

There is no AMD GPU here, so this is how the CDNA lowering's output gets executed: the generated HIP
source is compiled by NVRTC with the CDNA arch layer swapped for an emulation of it in CUDA
(include/tiles_emu/arch.h), and launched like the Hopper backend's kernels. Everything above the arch
layer (the register and LDS tiles, swizzles, buffer views, schedules, waits and barriers the lowering
wrote) is the code that would run on an MI300X or MI355X. Choose the target with the backend name:
"cdna-emu" (gfx942) or "cdna-emu:gfx950".

What a passing run shows: the indexing, the MFMA fragment layouts (the emulation computes MFMA from the
ISA's lane layouts, not from layouts.py), the LDS swizzles, the bounds (buffer loads read 0 past the
view, LDS capped at the target's size), the s_waitcnt values (a load lands only at the wait that covers
it) and the barrier logic (s_barrier counts waves as the hardware does; unbalanced ping-pong barriers are
reported). What it does not: timing, instruction scheduling, register allocation (AGPRs, spills) or LDS
bank conflicts; those are read from the gfx942/gfx950 ISA the CDNA backend compiles in CI. LDS addresses
are checked against the target's LDS size, not against the kernel's own allocation.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
import threading
from typing import Optional

import torch

from tiles.core.backend import BackendUnavailable
from tiles.core.lowering import header_files

from ..cdna import runtime as cdna_runtime
from ..cdna.backend import CDNABackend, kept_kernel
from ..cdna.gemm_probe import INCLUDE_DIR as CDNA_INCLUDE

EMU_INCLUDE = str(pathlib.Path(__file__).parent / "include")
ARCHES = ("gfx942", "gfx950")
LDS_BYTES = {"gfx942": 64 * 1024, "gfx950": 160 * 1024}

WHAT_IT_CHECKS = ("checks indexing, MFMA layouts (from the ISA), LDS swizzles, bounds, s_waitcnt values and "
                  "barrier logic; not timing, scheduling, AGPR placement or bank conflicts")

# tiles_emu_status[0] -> what went wrong
ERRORS = {
    1: "an s_barrier that no other wave reached within 10 s (a deadlock: a wave skipped a barrier the others wait at)",
    2: "the waves ended having executed different numbers of s_barrier (unbalanced ping-pong barriers)",
    3: "an LDS access past the target's LDS size, or misaligned",
}
# one status word per module: emulated launches run one at a time (run() waits for each)
_one_at_a_time = threading.Lock()


class EmulationError(RuntimeError):
    """The emulated CDNA kernel broke a rule the hardware depends on."""


def prologue(arch: str) -> str:
    """What goes ahead of the CDNA source so that it compiles as CUDA."""
    return (f"// tiles cdna-emu: the {arch} kernel below is the CDNA backend's output, unchanged, compiled for an\n"
            f"// NVIDIA GPU against the emulated arch layer (tiles_emu/arch.h): {WHAT_IT_CHECKS}.\n"
            f"#define TILES_EMU_CUDA 1\n#define __{arch}__ 1\n#include \"tiles_emu/arch.h\"\n\n")


class CDNAEmuBackend(CDNABackend):
    source_suffix = ".cu"
    include_dir = None  # two header trees; see emit()

    def __init__(self, arch: str = "gfx942"):
        if arch not in ARCHES:
            raise ValueError(f"backend 'cdna-emu:{arch}': arch must be one of {list(ARCHES)}")
        self.target = arch
        self.name = "cdna-emu" if arch == "gfx942" else f"cdna-emu:{arch}"
        self._available = None

    # ------------------------------------------------------------------ what it runs on
    def available(self):
        if self._available is None:
            self._available = self._probe()
        return self._available

    def _probe(self):
        from ..hopper import runtime as cuda_runtime

        try:
            major, minor = cuda_runtime.nvrtc_version()
        except Exception as e:  # noqa: BLE001 - bindings or libnvrtc missing
            return False, f"NVRTC not loadable ({type(e).__name__}: {e})"
        if not torch.cuda.is_available() or getattr(torch.version, "hip", None) is not None:
            return False, f"needs an NVIDIA GPU to emulate {self.target} on (NVRTC {major}.{minor} present: emulated sources still compile)"
        need = LDS_BYTES[self.target] + 48 * 1024  # + the emulator's own block state
        have = torch.cuda.get_device_properties(torch.cuda.current_device()).shared_memory_per_block_optin
        if have < need:
            return False, f"emulating {self.target} needs {need} bytes of shared memory per block, this GPU has {have}"
        other = [f"'cdna-emu:{a}'" for a in ARCHES if a != self.target]
        return True, (f"{self.target} emulated on {torch.cuda.get_device_name()} (NVRTC {major}.{minor}; "
                      f"{', '.join(other)} for the other target); {WHAT_IT_CHECKS}")

    def serves(self, device: torch.device) -> bool:
        return device.type == "cuda" and getattr(torch.version, "hip", None) is None

    def arch(self, arch: Optional[str] = None) -> str:
        return arch or self.target

    def compute_units(self, arch: str, device) -> int:
        """The emulated target's CUs (cdna.backend.CUS), not the NVIDIA GPU's SMs."""
        from ..cdna.backend import CUS

        return CUS[arch]

    def config(self, kernel: str, arch: Optional[str] = None, **problem) -> dict:
        return super().config(kernel, arch or self.target, **problem)

    # ------------------------------------------------------------------ source
    def lower(self, kfn, *args, arch: Optional[str] = None, **kwargs):
        lowered = super().lower(kfn, *args, arch=arch or self.target, **kwargs)
        return dataclasses.replace(lowered, backend="cdna-emu", source=prologue(lowered.arch) + lowered.source)

    def emit(self, lowered, out_dir: str) -> list:
        """The .cu plus both header trees (tiles/ from the CDNA backend, tiles_emu/ from here): nvcc
        -arch=sm_90a -I out_dir compiles it."""
        os.makedirs(out_dir, exist_ok=True)
        src = os.path.join(out_dir, lowered.entry + self.source_suffix)
        with open(src, "w") as f:
            f.write(lowered.source)
        paths = [src]
        for root in (CDNA_INCLUDE, EMU_INCLUDE):
            for rel in header_files(root):
                dst = os.path.join(out_dir, rel)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copyfile(os.path.join(root, rel), dst)
                paths.append(dst)
        return paths

    def flat_source(self, lowered) -> str:
        """One self-contained string (every header inlined), what NVRTC compiles and the cache key covers."""
        return cdna_runtime.flatten(lowered.source, [EMU_INCLUDE, CDNA_INCLUDE])

    def compile(self, lowered):
        from ..hopper import runtime as cuda_runtime

        return cuda_runtime.compile_cuda(self.flat_source(lowered), name=lowered.entry + ".cu")

    # ------------------------------------------------------------------ run
    def launch(self, kfn, *args, **kwargs) -> None:
        ok, why = self.available()
        if not ok:
            raise BackendUnavailable(f"backend={self.name!r} is not available here: {why}")
        from ..hopper import runtime as cuda_runtime

        def start(lowered, entry, grid, block, argv):
            kern = kept_kernel(self, (lowered.source, entry, torch.cuda.current_device()),
                           lambda: cuda_runtime.load(self.compile(lowered).cubin, entry))
            run(kern, grid, block, argv, self.target, what=f"{self.name} {entry}")

        self.launch_with(kfn, args, kwargs, self.target, start)


def _global(kern, name: str):
    from ..hopper.runtime import _cu, _ok

    dptr, size = _ok(_cu().cuModuleGetGlobal(kern.module, name.encode()), f"cuModuleGetGlobal({name})")
    return dptr, size


def run(kern, grid, block, argv, arch: str, what: str = "cdna-emu kernel") -> None:
    """Launch an emulated kernel on torch's current stream, wait for it and raise EmulationError if the
    emulation recorded a broken rule. (Synchronous: this is a checker, not a fast path.)"""
    import ctypes

    from ..hopper.runtime import _cu, _ok

    cu = _cu()
    stream = torch.cuda.current_stream().cuda_stream
    status, _ = _global(kern, "tiles_emu_status")
    dyn, _ = _global(kern, "tiles_emu_dynamic_bytes")
    nbytes = ctypes.c_uint32()
    out = (ctypes.c_uint32 * 4)()
    with _one_at_a_time:
        _ok(cu.cuMemcpyDtoH(ctypes.addressof(nbytes), dyn, 4), "cuMemcpyDtoH(tiles_emu_dynamic_bytes)")
        _ok(cu.cuMemsetD32Async(status, 0, 4, stream), "cuMemsetD32Async(tiles_emu_status)")
        kern.launch(grid, block, argv, smem=int(nbytes.value), stream=stream)
        _ok(cu.cuMemcpyDtoHAsync(ctypes.addressof(out), status, 16, stream), "cuMemcpyDtoHAsync(tiles_emu_status)")
        _ok(cu.cuStreamSynchronize(stream), f"{what}")
    code, block_id, wave, detail = list(out)
    if code:
        raise EmulationError(f"{what} ({arch}): block {block_id}, wave {wave}: "
                             f"{ERRORS.get(code, f'error {code}')} [detail {detail:#x}]")
