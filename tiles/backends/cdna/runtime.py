"""CDNA run-time path: hiprtc compiles the generated source, hipModuleLoadData / hipModuleLaunchKernel run it
(through hip-python). On a machine without ROCm nothing here can run: ``available()`` says why, in the
words hip-python uses ("failed to dlopen ... libamdhip64.so"), or that hip-python is not installed.

Nothing in this module has run on AMD hardware (none exists in this project); it is written against
hip-python 10's documented API and exercised on CPU machines only up to the dlopen failure.
"""
from __future__ import annotations

import ctypes
import os
import re
from typing import Optional, Sequence, Tuple

from .gemm_probe import INCLUDE_DIR

_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.M)


def flatten(source: str, include_dir=INCLUDE_DIR) -> str:
    """The source with our own ``#include "tiles/..."`` headers inlined once each (``#pragma once`` honoured),
    so hiprtc receives one self-contained string and the kernel cache key covers every header byte.
    `include_dir` may be a list of directories, searched in order."""
    seen = set()
    dirs = [include_dir] if isinstance(include_dir, (str, os.PathLike)) else list(include_dir)

    def expand(text: str, cur_dir: str) -> str:
        def repl(m):
            name = m.group(1)
            for base in (cur_dir, *dirs):
                path = os.path.normpath(os.path.join(base, name))
                if os.path.isfile(path):
                    break
            else:
                return m.group(0)  # not ours: leave it to the compiler
            if path in seen:
                return f"// (already included: {name})"
            seen.add(path)
            body = open(path).read().replace("#pragma once", "")
            return f"// ---- begin {name}\n" + expand(body, os.path.dirname(path)) + f"\n// ---- end {name}"

        return _INCLUDE_RE.sub(repl, text)

    return expand(source, dirs[0])


def _modules():
    from hip import hip, hiprtc  # noqa: F401  (ImportError when hip-python is absent)

    return hip, hiprtc


def available() -> Tuple[bool, str]:
    """(True, device description) when hip-python, the HIP runtime and an AMD GPU are usable, else
    (False, reason)."""
    try:
        hip, hiprtc = _modules()
    except ImportError as e:
        return False, f"hip-python not installed ({e})"
    try:
        err, n = hip.hipGetDeviceCount()
    except RuntimeError as e:  # hip-python raises this when libamdhip64.so cannot be loaded
        return False, str(e)
    if err != hip.hipError_t.hipSuccess or n == 0:
        return False, f"no AMD GPU visible (hipGetDeviceCount: {err}, {n})"
    try:
        hiprtc.hiprtcVersion()
    except RuntimeError as e:
        return False, str(e)
    return True, f"{n} device(s), arch {device_arch()}"


def hiprtc_version() -> str:
    """hiprtc's version, for the kernel cache key (a new compiler must not load old binaries)."""
    _, hiprtc = _modules()
    r = hiprtc.hiprtcVersion()
    return ".".join(str(x) for x in (r[1:] if isinstance(r, tuple) else r))


def _check(result, what: str):
    err = result[0] if isinstance(result, tuple) else result
    hip, hiprtc = _modules()
    ok = err in (hip.hipError_t.hipSuccess, hiprtc.hiprtcResult.HIPRTC_SUCCESS)
    if not ok:
        raise RuntimeError(f"{what} failed: {err}")
    return result[1:] if isinstance(result, tuple) and len(result) > 1 else None


def device_arch(device: int = 0) -> str:
    """gcnArchName without feature suffixes, e.g. 'gfx942' (from 'gfx942:sramecc+:xnack-')."""
    hip, _ = _modules()
    props = hip.hipDeviceProp_t()
    _check(hip.hipGetDeviceProperties(props, device), "hipGetDeviceProperties")
    name = props.gcnArchName
    name = name.decode() if isinstance(name, bytes) else str(name)
    return name.split(":")[0]


def rtc_options(arch: str, options: Sequence[str] = ()) -> list:
    """What hiprtc is given (the kernel cache key holds this same list)."""
    return [f"--offload-arch={arch}", "-O3", "-std=c++17", *options]


def compile_rtc(source: str, arch: str, name: str, options: Sequence[str] = ()) -> bytes:
    """hiprtc: flattened source -> code object for ``arch``."""
    hip, hiprtc = _modules()
    src = flatten(source).encode()
    (prog,) = _check(hiprtc.hiprtcCreateProgram(src, (name + ".hip").encode(), 0, [], []), "hiprtcCreateProgram")
    opts = [o.encode() for o in rtc_options(arch, options)]
    res = hiprtc.hiprtcCompileProgram(prog, len(opts), opts)
    if res[0] != hiprtc.hiprtcResult.HIPRTC_SUCCESS:
        (n,) = _check(hiprtc.hiprtcGetProgramLogSize(prog), "hiprtcGetProgramLogSize")
        log = bytearray(n)
        hiprtc.hiprtcGetProgramLog(prog, log)
        raise RuntimeError(f"hiprtc failed to compile {name} for {arch}:\n{log.decode(errors='replace')}")
    (n,) = _check(hiprtc.hiprtcGetCodeSize(prog), "hiprtcGetCodeSize")
    code = bytearray(n)
    _check(hiprtc.hiprtcGetCode(prog, code), "hiprtcGetCode")
    hiprtc.hiprtcDestroyProgram(prog.createRef())
    return bytes(code)


class Kernel:
    """A loaded kernel: ``Kernel(code_object, name).launch(grid, block, args, stream)``; args are ints
    (device pointers are passed as ints, e.g. ``tensor.data_ptr()``), Python ints -> int32, floats -> float32."""

    def __init__(self, code_object: bytes, name: str):
        hip, _ = _modules()
        (self.module,) = _check(hip.hipModuleLoadData(code_object), "hipModuleLoadData")
        (self.function,) = _check(hip.hipModuleGetFunction(self.module, name.encode()), "hipModuleGetFunction")
        self.name = name

    @staticmethod
    def pack(args: Sequence) -> tuple:
        out = []
        for a in args:
            if isinstance(a, ctypes._SimpleCData):
                out.append(a)
            elif isinstance(a, float):
                out.append(ctypes.c_float(a))
            elif isinstance(a, int) and a > 2**31 - 1:
                out.append(ctypes.c_void_p(a))  # a device address
            elif isinstance(a, int):
                out.append(ctypes.c_int(a))
            else:
                raise TypeError(f"kernel argument {a!r}: pass ints, floats, device addresses or ctypes values")
        return tuple(out)

    def launch(self, grid: Sequence[int], block: Sequence[int], args: Sequence, stream: Optional[int] = None,
               shared_bytes: int = 0) -> None:
        hip, _ = _modules()
        g = tuple(grid) + (1,) * (3 - len(grid))
        b = tuple(block) + (1,) * (3 - len(block))
        _check(hip.hipModuleLaunchKernel(self.function, *g, *b, shared_bytes, stream, None, self.pack(args)),
               f"hipModuleLaunchKernel({self.name})")
