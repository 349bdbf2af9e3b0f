"""Hopper run-time: NVRTC → cubin (sm_90a), driver-API module load, TMA tensor maps, launches.

Everything goes through cuda-python (``cuda.bindings.nvrtc`` / ``cuda.bindings.driver``), so no CUDA
toolkit is needed where tiles is installed; NVRTC comes from the ``nvidia-cuda-nvrtc`` wheel.
Kernels run on torch's current stream, so they order correctly with surrounding torch work.
"""
from __future__ import annotations

import ctypes
import hashlib
import pathlib
import re
from dataclasses import dataclass, field
from typing import Callable, Dict, Optional, Sequence, Tuple

INCLUDE_DIR = pathlib.Path(__file__).parent / "include"
ARCH = "sm_90a"  # wgmma and setmaxnreg exist only on the arch-specific target
TEMPLATE_VERSION = "hopper-1"  # bump when headers or templates change meaning (part of the cache key)
BASE_OPTIONS = ("-std=c++17", "--ptxas-options=-v")


class CompileError(RuntimeError):
    """NVRTC rejected the source; the message carries the compiler log."""


class DriverError(RuntimeError):
    """A CUDA driver call failed."""


# ----------------------------------------------------------------------------- NVRTC


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("the Hopper backend needs cuda-python (pip install cuda-bindings nvidia-cuda-nvrtc)") from e
    return nvrtc


def nvrtc_version() -> Tuple[int, int]:
    nvrtc = _nvrtc()
    err, major, minor = nvrtc.nvrtcVersion()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"nvrtcVersion failed: {err} (is the nvidia-cuda-nvrtc wheel installed?)")
    return major, minor


@dataclass
class Compiled:
    """A cubin and what ptxas said about it (the log is empty when the cubin came from the cache)."""

    cubin: bytes
    log: str = ""
    resources: Dict[str, Dict[str, int]] = field(default_factory=dict)  # kernel -> ptxas numbers


_PTXAS_FUNC = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_NUMS = {
    "stack": re.compile(r"(\d+) bytes stack frame"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "registers": re.compile(r"Used (\d+) registers"),
    "smem": re.compile(r"(\d+) bytes smem"),
}


def parse_ptxas(log: str) -> Dict[str, Dict[str, int]]:
    """Per-kernel numbers from a `ptxas -v` log: registers, stack, spill_stores, spill_loads, smem."""
    out: Dict[str, Dict[str, int]] = {}
    cur = None
    for line in log.splitlines():
        m = _PTXAS_FUNC.search(line)
        if m:
            cur = out.setdefault(m.group(1), {})
            continue
        if cur is None:
            continue
        for key, rx in _PTXAS_NUMS.items():
            mm = rx.search(line)
            if mm:
                cur[key] = int(mm.group(1))
    return out


def nvrtc_options(arch: str, options: Sequence[str] = ()) -> list:
    """What NVRTC is given besides the include path (whose headers the cache key covers by content)."""
    return [f"-arch={arch}", *BASE_OPTIONS, *options]


def nvrtc_compile(source: str, arch: str = ARCH, options: Sequence[str] = (), name: str = "tiles.cu") -> Compiled:
    """Compile CUDA C++ to a cubin for `arch` with the tiles headers on the include path (no cache)."""
    nvrtc = _nvrtc()
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    if err != ok:
        raise CompileError(f"nvrtcCreateProgram failed: {err}")
    try:
        opts = [*nvrtc_options(arch), f"-I{INCLUDE_DIR}", *options]
        (res,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        _, n = nvrtc.nvrtcGetProgramLogSize(prog)
        buf = b" " * n
        nvrtc.nvrtcGetProgramLog(prog, buf)
        log = buf.rstrip(b"\x00 ").decode(errors="replace")
        if res != ok:
            raise CompileError(f"NVRTC failed to compile {name} for {arch} ({res}); options {opts}\n{log}")
        _, n = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = b" " * n
        (res,) = nvrtc.nvrtcGetCUBIN(prog, cubin)
        if res != ok or n == 0:
            raise CompileError(f"NVRTC produced no cubin for {arch} ({res}): a virtual arch (compute_*) gives PTX only\n{log}")
        return Compiled(cubin=bytes(cubin), log=log, resources=parse_ptxas(log))
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


# ----------------------------------------------------------------------------- cache


def _capturing() -> bool:
    """Whether torch's current stream is capturing a CUDA graph: compiling there would stall the
    capture for seconds, so only a cache hit is allowed."""
    try:
        import torch

        return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
    except Exception:  # noqa: BLE001 - no CUDA runtime: not capturing
        return False


def _cached_build(key_parts: dict, build: Callable[[], bytes]) -> bytes:
    """The one place kernels are cached (tiles.core.cache: memory in front of disk)."""
    from tiles.core import cache as core_cache

    return core_cache.get_cache().get_or_build(key_parts, build, allow_build=not _capturing(),
                                               name=key_parts.get("name"))


def _tiles_version() -> str:
    try:
        from tiles._version import __version__
        return __version__
    except ImportError:  # pragma: no cover
        return "0"


def _headers_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(INCLUDE_DIR.rglob("*.h")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _nvrtc_address() -> Optional[int]:
    """Where the libnvrtc that cuda.bindings calls is mapped (its nvrtcVersion), so the cache key names
    that copy where a process holds two; None where the bindings do not say (a private interface)."""
    try:
        from cuda.bindings._internal import nvrtc as internal

        return int(internal._inspect_function_pointer("__nvrtcVersion")) or None
    except Exception:  # noqa: BLE001  (older or newer bindings: fall back to every mapped copy)
        return None


def cuda_key(source: str, arch: str = ARCH, options: Sequence[str] = ()) -> dict:
    """The kernel cache's key for a compile: the options as the list NVRTC gets (so ["-DA -DB"] and
    ["-DA", "-DB"] differ), and the compiler as its version and the library file that was loaded."""
    from tiles.core.cache import library_identity

    major, minor = nvrtc_version()
    return {
        "source": source,
        "template_version": f"{TEMPLATE_VERSION}:{_headers_digest()}",
        "options": nvrtc_options(arch, options),
        "compiler_version": f"nvrtc-{major}.{minor} {library_identity('libnvrtc', _nvrtc_address())}".rstrip(),
        "arch": arch,
        "tiles_version": _tiles_version(),
    }


def compile_cuda(source: str, arch: str = ARCH, options: Sequence[str] = (), name: str = "tiles.cu",
                 cache: bool = True) -> Compiled:
    """NVRTC-compile `source` (cached). Compiled.log is filled only when the compiler actually ran."""
    if not cache:
        return nvrtc_compile(source, arch, options, name)
    ran: list = []

    def build() -> bytes:
        c = nvrtc_compile(source, arch, options, name)
        ran.append(c)
        return c.cubin

    cubin = _cached_build(cuda_key(source, arch, options), build)
    return ran[0] if ran else Compiled(cubin=cubin)


# ----------------------------------------------------------------------------- driver


def _cu():
    from cuda.bindings import driver
    return driver


def _ok(result, what: str):
    """Unpack a cuda-bindings (err, *values) result, raising DriverError with `what` on failure."""
    cu = _cu()
    if isinstance(result, tuple):
        err, *rest = result
    else:
        err, rest = result, []
    if err != cu.CUresult.CUDA_SUCCESS:
        _, msg = cu.cuGetErrorString(err)
        raise DriverError(f"{what} failed: {err.name if hasattr(err, 'name') else err}: "
                          f"{msg.decode() if isinstance(msg, bytes) else msg}")
    return rest[0] if len(rest) == 1 else rest


_ctx_ready = False


def ensure_context() -> None:
    """Make torch's primary context current on this thread (the driver API needs one)."""
    global _ctx_ready
    import torch
    cu = _cu()
    if not torch.cuda.is_available():
        raise DriverError("no CUDA device is visible to torch")
    torch.cuda.init()
    torch.empty(1, device="cuda")  # forces the runtime to create/bind the primary context
    if not _ctx_ready:
        _ok(cu.cuInit(0), "cuInit")
        _ctx_ready = True
    ctx = _ok(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if int(ctx) == 0:
        dev = _ok(cu.cuDeviceGet(torch.cuda.current_device()), "cuDeviceGet")
        ctx = _ok(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        _ok(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


class Kernel:
    """One __global__ function of a loaded cubin."""

    def __init__(self, cubin: bytes, name: str):
        ensure_context()
        cu = _cu()
        self.name = name
        self.module = _ok(cu.cuModuleLoadData(cubin), f"cuModuleLoadData({name})")
        self.function = _ok(cu.cuModuleGetFunction(self.module, name.encode()), f"cuModuleGetFunction({name})")
        self._smem = 0

    def set_smem(self, nbytes: int) -> None:
        """Allow `nbytes` of dynamic shared memory (needed above 48 KB)."""
        if nbytes > self._smem:
            cu = _cu()
            attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _ok(cu.cuFuncSetAttribute(self.function, attr, nbytes), f"cuFuncSetAttribute({self.name}, smem={nbytes})")
            self._smem = nbytes

    def launch(self, grid, block, args: Sequence, smem: int = 0, stream: Optional[int] = None) -> None:
        """Launch on `stream` (default: torch's current stream). `args` are ctypes objects (see arg_*)."""
        import torch
        cu = _cu()
        grid = tuple(grid) + (1,) * (3 - len(grid))
        block = tuple(block) + (1,) * (3 - len(block))
        self.set_smem(smem)
        if stream is None:
            stream = torch.cuda.current_stream().cuda_stream
        ptrs = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
        _ok(cu.cuLaunchKernel(self.function, *grid, *block, smem, stream, ctypes.addressof(ptrs), 0),
            f"cuLaunchKernel({self.name}, grid={grid}, block={block}, smem={smem})")


_kernels: Dict[Tuple[str, str, int], Kernel] = {}


def load(cubin: bytes, name: str) -> Kernel:
    """Load (once per cubin, name and device) and return the kernel."""
    import torch
    key = (hashlib.sha256(cubin).hexdigest(), name, torch.cuda.current_device())
    k = _kernels.get(key)
    if k is None:
        k = _kernels[key] = Kernel(cubin, name)
    return k


# ----------------------------------------------------------------------------- kernel arguments


def arg_ptr(t) -> ctypes.c_void_p:
    return ctypes.c_void_p(t.data_ptr())


def arg_i32(x: int) -> ctypes.c_int32:
    return ctypes.c_int32(int(x))


def arg_i64(x: int) -> ctypes.c_int64:
    return ctypes.c_int64(int(x))


def arg_f32(x: float) -> ctypes.c_float:
    return ctypes.c_float(float(x))


# ----------------------------------------------------------------------------- TMA tensor maps


_SWIZZLE = {0: "CU_TENSOR_MAP_SWIZZLE_NONE", 32: "CU_TENSOR_MAP_SWIZZLE_32B", 64: "CU_TENSOR_MAP_SWIZZLE_64B",
            128: "CU_TENSOR_MAP_SWIZZLE_128B"}


def _tma_dtype(dtype):
    import torch
    cu = _cu()
    T = cu.CUtensorMapDataType
    table = {torch.bfloat16: T.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, torch.float16: T.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
             torch.float32: T.CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
             torch.uint8: T.CU_TENSOR_MAP_DATA_TYPE_UINT8}  # 8-bit floats travel as bytes
    if dtype not in table:
        raise TypeError(f"no TMA element type for {dtype}")
    return table[dtype]


def tensor_map(t, box: Sequence[int], swizzle: int = 128, dims: Optional[Sequence[int]] = None,
               strides: Optional[Sequence[int]] = None) -> ctypes.Array:
    """A CUtensorMap (128 bytes, as a ctypes array ready to pass by value) over tensor `t`.

    `dims`/`strides` are innermost-first in elements (default: t's shape/strides reversed, innermost
    stride 1); `box` is innermost-first too: box[0] * elem_size must equal the swizzle width when
    swizzling (one smem.h chunk). Elements outside `dims` read as zero. TMA needs the base address
    16-byte aligned and every outer stride a multiple of 16 bytes.
    """
    cu = _cu()
    esz = t.element_size()
    dims = list(dims) if dims is not None else list(reversed(t.shape))
    strides = list(strides) if strides is not None else list(reversed(t.stride()))
    if strides[0] != 1:
        raise ValueError(f"TMA needs the innermost dimension contiguous, got strides {t.stride()}")
    if t.data_ptr() % 16:
        raise ValueError("TMA needs a 16-byte aligned base address")
    for s in strides[1:]:
        if (s * esz) % 16:
            raise ValueError(f"TMA needs outer strides that are multiples of 16 bytes, got {s * esz} "
                             f"(pad the row length to a multiple of {16 // esz} elements)")
    if swizzle and box[0] * esz != swizzle:
        raise ValueError(f"box inner size {box[0] * esz} B must equal the {swizzle}-byte swizzle")
    rank = len(dims)
    tm = _ok(cu.cuTensorMapEncodeTiled(
        _tma_dtype(t.dtype), rank, t.data_ptr(),
        [cu.cuuint64_t(int(d)) for d in dims],
        [cu.cuuint64_t(int(s) * esz) for s in strides[1:]],
        [cu.cuuint32_t(int(b)) for b in box],
        [cu.cuuint32_t(1)] * rank,
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(cu.CUtensorMapSwizzle, _SWIZZLE[swizzle]),
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), f"cuTensorMapEncodeTiled(box={list(box)})")
    return (ctypes.c_ubyte * 128).from_buffer_copy(bytes((ctypes.c_ubyte * 128).from_address(tm.getPtr())))


def null_map() -> ctypes.Array:
    """128 zero bytes in the place of a tensor map a kernel variant never reads."""
    return (ctypes.c_ubyte * 128)()


def tensor_map_2d(t, box_rows: int, box_cols: int, swizzle: int = 128) -> ctypes.Array:
    """Tensor map over a 2-D row-major tensor for smem.h tiles: one box = one chunk (box_cols x box_rows)."""
    if t.dim() != 2:
        raise ValueError(f"tensor_map_2d needs a 2-D tensor, got shape {tuple(t.shape)}")
    return tensor_map(t, (box_cols, box_rows), swizzle)


def max_active_clusters(kernel: "Kernel", cluster: int, threads: int, smem: int, grid: int) -> int:
    """How many clusters of `cluster` CTAs can be resident at once (GPCs need not split evenly into
    clusters, so this can be below num_sms() // cluster); a persistent grid must not exceed it."""
    cu = _cu()
    kernel.set_smem(smem)
    cfg = cu.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid, 1, 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = threads, 1, 1
    cfg.sharedMemBytes = smem
    attr = cu.CUlaunchAttribute()
    attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster, 1, 1
    cfg.attrs = [attr]
    cfg.numAttrs = 1
    return int(_ok(cu.cuOccupancyMaxActiveClusters(kernel.function, cfg), "cuOccupancyMaxActiveClusters"))


def num_sms() -> int:
    import torch
    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
