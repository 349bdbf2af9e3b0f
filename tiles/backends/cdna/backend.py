"""The CDNA backend object the registry loads (tiles.backends: "cdna").

Lowering works everywhere (``python -m tiles show gemm --backend cdna --arch gfx950``). Launching needs
ROCm and an AMD GPU (hip-python + hiprtc); without them ``available()`` is (False, reason) and ``launch``
raises BackendUnavailable before doing anything. The launch path has never run on AMD hardware here.
"""
from __future__ import annotations

from typing import Optional

import torch

from tiles.core import ir
from tiles.core.backend import Backend, BackendUnavailable, LaunchCache, call_signature
from tiles.core.lowering import LoweringError, check_reads

from . import runtime
from .gemm_probe import INCLUDE_DIR, TEMPLATE_VERSION
from .lower import DEFAULT_ARCH, CDNALowering, check_gemm_args

# per-arch GEMM tiles (gemm_probe.DEFAULTS): gfx950 has the LDS for a 64-deep double-buffered K tile
GEMM_TILES = {"gfx950": {"BM": 256, "BN": 256, "BK": 64}, "gfx942": {"BM": 256, "BN": 256, "BK": 32}}
# the scaled fp8 GEMMs (block and row-wise scales): one lowering, lower_fp8.py
FP8_KERNELS = ("gemm_fp8", "gemm_fp8_rowwise")
# Compute units per target's full part (MI300X 304, MI355X 256; HARDWARE.md): what cdna-emu assumes. On
# an AMD GPU the device's own count is read (an MI300A, MI308X or a partition mode has fewer). An
# attention grid with fewer programs (decode: one program a key / value head and sequence) is cut along
# the keys until it fills them once.
CUS = {"gfx942": 304, "gfx950": 256}


class CDNABackend(Backend):
    name = "cdna"
    include_dir = INCLUDE_DIR
    source_suffix = ".hip"
    gemm_multiple = 8  # A and B are read in 16-byte vectors along K and N (lower.check_gemm_args)

    def available(self):
        return runtime.available()

    def serves(self, device: torch.device) -> bool:
        return device.type == "cuda" and getattr(torch.version, "hip", None) is not None

    def arch(self, arch: Optional[str] = None) -> str:
        if arch:
            return arch
        ok, _ = runtime.available()
        return runtime.device_arch() if ok else DEFAULT_ARCH

    def supports(self, kernel: str, **problem) -> bool:
        if kernel == "attention_fwd":
            return True  # lower_attention.py (8-wave ping-pong, S^T softmax)
        if kernel == "attention_bwd_dq":
            return True  # lower_attention.py (S^T / dP^T / dQ^T, register-prefetch pipeline)
        if kernel == "attention_bwd_dkdv":
            return True  # lower_attention.py (keys split over the waves; S / dP with queries in registers)
        if kernel in FP8_KERNELS:
            return True  # lower_fp8.py (fp8 MFMA, per-K-block promotion, register-staged double buffer)
        from .lower_simt import SIMT_KERNELS

        return kernel == "gemm" or kernel in SIMT_KERNELS  # SIMT: lower_simt.py (kernels without mma)

    def config(self, kernel: str, arch: Optional[str] = None, **problem) -> dict:
        if kernel == "gemm":
            return dict(GEMM_TILES.get(arch or DEFAULT_ARCH, GEMM_TILES[DEFAULT_ARCH]))
        if kernel == "attention_fwd":
            from .lower_attention import default_tiles

            return default_tiles(arch or DEFAULT_ARCH, int(problem.get("D", 128)))
        if kernel == "attention_bwd_dq":
            from .lower_attention import default_tiles_bwd

            return default_tiles_bwd(arch or DEFAULT_ARCH, int(problem.get("D", 128)))
        if kernel == "attention_bwd_dkdv":
            from .lower_attention import default_tiles_dkdv

            return default_tiles_dkdv(arch or DEFAULT_ARCH, int(problem.get("D", 128)))
        return {}

    def lower(self, kfn, *args, arch: Optional[str] = None, split: Optional[str] = None, **kwargs):
        """The kernel lowered for `arch`; `split` (the merged output's dtype) lowers attention_fwd's parts
        of a grid cut along the keys, and its merge (split.h)."""
        arch = self.arch(arch)
        k = kfn.trace(*args, **kwargs)
        from .lower_simt import SimtLowering, uses_mma

        if split is not None and kfn.name != "attention_fwd":
            raise LoweringError(f"cdna: only attention_fwd is cut along its keys, not {kfn.name!r}")
        if not uses_mma(k):  # any kernel without mma: the generic op-by-op lowering
            return SimtLowering(k, arch).lower()
        if kfn.name == "attention_fwd":
            from .lower_attention import CDNAAttentionLowering

            return CDNAAttentionLowering(k, arch, split=split).lower()
        if kfn.name == "attention_bwd_dq":
            from .lower_attention import CDNAAttentionBwdDqLowering

            return CDNAAttentionBwdDqLowering(k, arch).lower()
        if kfn.name == "attention_bwd_dkdv":
            from .lower_attention import CDNAAttentionBwdDkdvLowering

            return CDNAAttentionBwdDkdvLowering(k, arch).lower()
        if kfn.name in FP8_KERNELS:
            from .lower_fp8 import CDNAFp8GemmLowering

            return CDNAFp8GemmLowering(k, arch).lower()
        from tiles.kernels import SUITE

        if kfn.name in SUITE and not self.supports(kfn.name):
            raise LoweringError(f"cdna: kernel {kfn.name!r} has no CDNA lowering (lowered here: "
                                f"{sorted(n for n in SUITE if self.supports(n))}); run it with backend='interp'")
        return CDNALowering(k, arch).lower()  # a kernel of the user's is tried as a GEMM

    def check_fp8(self, name: str, dtype: torch.dtype, device=None) -> None:
        """The target's 8-bit format: gfx942 e4m3fnuz, gfx950 OCP e4m3fn (TypeError naming the argument)."""
        from .lower_fp8 import check_fp8

        check_fp8(name, dtype, self.arch())

    def prepare(self, kfn, *args, arch: str, split: Optional[str] = None, **kwargs):
        """Lower for `arch`, check the arguments the lowering's contract needs and bind them:
        (lowered, grid, argv) with argv as ctypes values; grid is None when there is nothing to run.
        Shared by this backend's launch and by cdna-emu's (through launch_with)."""
        import ctypes

        keep = ()
        if kfn.name in FP8_KERNELS:  # A, B k-contiguous with 16-byte rows (copies only when the caller's are not)
            from .lower_fp8 import operands

            keep = tuple(operands(*args[:2]))
            args = keep + tuple(args[2:])
        kwargs = {**self.config(kfn.name, arch, **kwargs), **kwargs}
        lowered = self.lower(kfn, *args, arch=arch, split=split, **kwargs)
        bound = kfn.bind(*args, **kwargs)
        env = kfn.runtime_env(lowered.kernel, bound)
        tensors = {p.name: bound.arguments[p.name] for p in lowered.kernel.params}
        if kfn.name == "attention_fwd":
            from .lower_attention import check_attention_args

            check_attention_args(*(tensors[p.name] for p in lowered.kernel.params if p not in lowered.kernel.reads),
                                 D=int(kwargs["D"]))
        elif kfn.name == "attention_bwd_dq":
            from .lower_attention import check_attention_bwd_dq_args

            check_attention_bwd_dq_args(*(tensors[p.name] for p in lowered.kernel.params if p not in lowered.kernel.reads),
                                        D=int(kwargs["D"]))
        elif kfn.name == "attention_bwd_dkdv":
            from .lower_attention import check_attention_bwd_dkdv_args

            check_attention_bwd_dkdv_args(*(tensors[p.name] for p in lowered.kernel.params if p not in lowered.kernel.reads),
                                          D=int(kwargs["D"]))
        elif kfn.name in FP8_KERNELS:
            from .lower_fp8 import check_fp8_args

            check_fp8_args(*tensors.values(), arch=arch)
        elif lowered.notes.get("lowering") != "simt":  # SIMT kernels bound-check every access
            A, B, C = (tensors[p.name] for p in lowered.kernel.params)
            check_gemm_args(A.shape[0], B.shape[1], A.shape[1], A.stride(0), B.stride(0), C.stride(0),
                            ptrs=(A.data_ptr(), B.data_ptr(), C.data_ptr()), strides_inner=(A.stride(1), B.stride(1), C.stride(1)),
                            elem_out=C.element_size())
        check_reads(lowered.kernel, tensors, env, [int(ir.evaluate(g, env)) for g in lowered.kernel.grid])
        # attention: the IR grid flattened to x (lowered.notes['launch_grid']) for the chiplet remap
        grid = tuple(int(ir.evaluate(g, env)) for g in lowered.notes.get("launch_grid", lowered.kernel.grid))
        argv = []
        for kind, x in lowered.args:
            if kind == "ptr":
                argv.append(ctypes.c_void_p(tensors[x.name].data_ptr()))
            elif kind in ("dim", "stride"):
                argv.append(ctypes.c_int32(int(env[x.name])))
            else:
                argv.append(ctypes.c_float(float(env[x.name])))
        if keep:  # the operand copies the pointers point into live as long as argv
            from .lower_fp8 import Argv

            argv = Argv(argv, keep)
        return lowered, (grid if min(grid) > 0 else None), argv

    def short_grid_parts(self, lowered, grid, arch: str, tensors: dict) -> int:
        """How many parts to cut each program of this launch into along its keys: 1 (not cut) unless it is
        attention_fwd with a merge declared (k.lse_merge) on a grid split.short_grid_parts cuts: fewer
        programs than the device has CUs, at least split.SHORT_GRID_TRIPS key blocks."""
        from tiles.core import split

        k = lowered.kernel
        merge, cfg = _merge_of(k), lowered.notes.get("config")
        if k.name != "attention_fwd" or merge is None or cfg is None or not split.cuttable(k):
            return 1
        # the heaviest program's trips, from the sizes (a count a program reads counts as its bound: a
        # paged cache's pages a sequence times the page size)
        env = {}
        for p in k.params:
            t = tensors[p.name]
            env.update({d.name: int(t.shape[i]) for i, d in enumerate(p.dims)})
            env.update({st.name: int(t.stride(i)) for i, st in enumerate(p.strides)})
        trips = split.heaviest_trips(k, env, int(ir.evaluate(k.grid[0], env)))
        device = tensors[k.params[0].name].device
        return split.short_grid_parts(grid[0], self.compute_units(arch, device), trips)

    def compute_units(self, arch: str, device) -> int:
        """The CUs a launch on `device` spreads over: the GPU's own count."""
        return torch.cuda.get_device_properties(device).multi_processor_count

    def launch_with(self, kfn, args, kwargs, arch: str, start) -> None:
        """Launch kfn by handing each kernel to `start(lowered, entry, grid, block, argv)`: the kernel as it
        is, or, for an attention grid shorter than the chip (short_grid_parts), its parts into an f32
        workspace (one slice a part, the outputs' shapes) and then <entry>_merge into the outputs. What
        a call builds (lowering, checks, arguments: about 17 ms of host time for attention) is kept by
        call signature, as the Hopper launcher keeps it, so a decode loop pays it once; the fp8 GEMMs,
        whose preparation may copy operands, are prepared every call. Shared by this backend's launch and
        cdna-emu's; each `start` compiles and launches its own way."""
        sig = None if kfn.name in FP8_KERNELS else call_signature(kfn, args, kwargs, (type(self).__name__, arch))
        launches = self.__dict__.setdefault("_launches", LaunchCache())
        plan = launches.get(sig)
        if plan is None:
            plan = self._plan(kfn, args, kwargs, arch)
            launches.put(sig, plan)
        plan.run(start)

    def _plan(self, kfn, args, kwargs, arch: str) -> "_Launch":
        import ctypes

        lowered, grid, argv = self.prepare(kfn, *args, arch=arch, **kwargs)
        if grid is None:
            return _Launch([])
        whole = _Launch([(lowered, lowered.entry, grid, lowered.block, argv)])
        bound = kfn.bind(*args, **{**self.config(kfn.name, arch, **kwargs), **kwargs})
        tensors = {p.name: bound.arguments[p.name] for p in lowered.kernel.params}
        parts = self.short_grid_parts(lowered, grid, arch, tensors)
        merge = _merge_of(lowered.kernel)
        if parts == 1:
            return whole
        out, lse = tensors[merge.out.name], tensors[merge.lse.name]
        if parts * out.numel() >= 2 ** 31:  # the parts' offsets are 32-bit kernel arguments
            return whole
        # a workspace slice stands in for O and L to lower and bind the parts' kernel; each launch then
        # takes a fresh workspace from torch's allocator and puts its addresses in those two arguments
        bound.arguments[merge.out.name] = torch.empty(out.shape, dtype=torch.float32, device=out.device)
        bound.arguments[merge.lse.name] = torch.empty(lse.shape, dtype=torch.float32, device=lse.device)
        merged = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}[out.dtype]
        low, grid, argv = self.prepare(kfn, *bound.args[1:], arch=arch, split=merged, **bound.kwargs)
        ptrs = [x.name for kind, x in low.args if kind == "ptr"]
        at = [i for i, (kind, _) in enumerate(low.args) if kind == "ptr"]
        sp = low.notes["split"]
        B, S, H = out.shape[:3]
        return _Launch(
            [(low, low.entry, (grid[0] * parts, 1, 1), low.block,
              list(argv) + [ctypes.c_int32(x) for x in (parts, out.numel(), lse.numel())]),
             (low, sp["merge"], (-(-out.numel() // sp["block"]), 1, 1), (sp["block"], 1, 1),
              [None, None, ctypes.c_void_p(out.data_ptr()), ctypes.c_void_p(lse.data_ptr())]
              + [ctypes.c_int32(x) for x in (parts, B, S, H, *out.stride()[:3], *lse.stride()[:2])])],
            workspace=((parts,) + tuple(out.shape), (parts,) + tuple(lse.shape), out.device,
                       at[ptrs.index(merge.out.name)], at[ptrs.index(merge.lse.name)]))

    def launch(self, kfn, *args, **kwargs) -> None:
        ok, why = self.available()
        if not ok:
            raise BackendUnavailable(f"backend='cdna' is not available here: {why}")
        from tiles.core import cache

        arch = self.arch()
        import tiles

        def load(lowered, entry):
            key = {"backend": "cdna", "source": runtime.flatten(lowered.source), "template_version": TEMPLATE_VERSION,
                   "arch": arch, "entry": lowered.entry, "options": runtime.rtc_options(arch),
                   "compiler_version": f"hiprtc {runtime.hiprtc_version()} {cache.library_identity('libhiprtc')}".rstrip(),
                   "tiles_version": tiles.__version__}
            code = cache.get_or_build(key, lambda: runtime.compile_rtc(lowered.source, arch, lowered.entry),
                                      name=lowered.entry)
            return runtime.Kernel(code, entry)

        def start(lowered, entry, grid, block, argv):
            # a module is loaded once per source, entry and device (hipModuleLoadData on every call would
            # leak one a launch)
            kern = kept_kernel(self, (lowered.source, entry, arch, torch.cuda.current_device()),
                               lambda: load(lowered, entry))
            kern.launch(grid, block, argv, stream=torch.cuda.current_stream().cuda_stream)

        self.launch_with(kfn, args, kwargs, arch, start)


def kept_kernel(backend, key, load):
    """The kernel `load()` returns, kept on the backend by `key` (a source, its entry, the device)."""
    kernels = backend.__dict__.setdefault("_kernels", {})
    if key not in kernels:
        kernels[key] = load()
    return kernels[key]


def _merge_of(kernel: ir.Kernel):
    """The merge a kernel's top-level pipelined loop declares (k.lse_merge), or None."""
    return next((n.merge for n in kernel.body if isinstance(n, ir.Loop) and n.merge is not None), None)


class _Launch:
    """A call's kernels as `start` takes them: (lowered, entry, grid, block, argv) each. With `workspace`
    (the O and L workspaces' shapes, their device, and the parts kernel's O and L argument positions),
    each run allocates a fresh workspace, the parts kernel writes it and the merge reads it."""

    def __init__(self, steps, workspace=None):
        self.steps, self.workspace = steps, workspace

    def run(self, start) -> None:
        import ctypes

        if self.workspace is None:
            for step in self.steps:
                start(*step)
            return
        o_shape, l_shape, device, o_at, l_at = self.workspace
        ws_o = torch.empty(o_shape, dtype=torch.float32, device=device)
        ws_l = torch.empty(l_shape, dtype=torch.float32, device=device)
        ptrs = [ctypes.c_void_p(ws_o.data_ptr()), ctypes.c_void_p(ws_l.data_ptr())]
        (low, entry, grid, block, argv), (mlow, mentry, mgrid, mblock, margv) = self.steps
        argv = list(argv)
        argv[o_at], argv[l_at] = ptrs
        start(low, entry, grid, block, argv)
        # the workspace is stream-ordered: torch's allocator hands it on only after the merge has run
        start(mlow, mentry, mgrid, mblock, ptrs + list(margv[2:]))
