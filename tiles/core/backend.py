"""What a backend is: availability, per-kernel tile configs, and launching a traced kernel."""
from __future__ import annotations

import os
from typing import Optional

import torch

from . import interp
from .trace import KernelFn


class BackendUnavailable(ValueError):
    """A backend was asked for on a machine (or device) that cannot run it."""


class Backend:
    name = "?"
    max_index = None  # elements one tensor may span; None where index math is 64-bit
    gemm_multiple = 1  # K and N the gemm lowering needs in multiples of this (the API pads with zeros)
    # whether the gemm lowering reads a B stored K-contiguous (a (N, K) weight passed as its view .t(), as
    # in x @ w.T) where it lies; where not, the API hands it a row-major copy
    gemm_b_kmajor = False

    def available(self) -> tuple[bool, str]:
        """(True, version info) or (False, why not)."""
        raise NotImplementedError

    def serves(self, device: torch.device) -> bool:
        """Whether tensors on `device` can be handed to this backend."""
        raise NotImplementedError

    def supports(self, kernel: str, **problem) -> bool:
        """Whether this backend lowers the suite kernel `kernel` (for this problem's sizes, when
        given); tiles' API picks kernels by it. Default: every kernel."""
        return True

    def config(self, kernel: str, **problem) -> dict:
        """Compile-time tile sizes for `kernel` on this backend (the kernel's defaults if empty)."""
        return {}

    def launch(self, kfn: KernelFn, *args, **kwargs) -> None:
        raise NotImplementedError

    # ---- for backends that generate source (`python -m tiles show ... --emit DIR`)
    include_dir: Optional[str] = None  # the device headers the generated source includes
    source_suffix = ".cpp"

    def emit(self, lowered, out_dir: str) -> list:
        """Write a standalone translation unit: the generated source plus every device header it
        includes, laid out so `-I out_dir` compiles it. Returns the paths written."""
        import shutil

        from .lowering import header_files

        os.makedirs(out_dir, exist_ok=True)
        src = os.path.join(out_dir, lowered.entry + self.source_suffix)
        with open(src, "w") as f:
            f.write(lowered.source)
        paths = [src]
        if self.include_dir:
            for rel in header_files(self.include_dir):
                dst = os.path.join(out_dir, rel)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copyfile(os.path.join(self.include_dir, rel), dst)
                paths.append(dst)
        return paths

    def check(self, device: torch.device) -> None:
        ok, why = self.available()
        if not ok:
            raise BackendUnavailable(f"backend={self.name!r} is not available here: {why}")
        if not self.serves(device):
            raise BackendUnavailable(f"backend={self.name!r} cannot run on tensors on device {device}")


def call_signature(kernel, args, kwargs, extra=()):
    """What a launch of `kernel` (the KernelFn itself: two kernels may share a name and differ in their
    body or overlap pattern) on these arguments depends on: each tensor's address, shape, strides, dtype
    and device, and every other argument's value. Equal signatures launch the same kernel with the same
    arguments, so a backend may reuse everything it built for the first (tensor maps, argument buffers)
    without keeping the tensors alive. None when an argument is not hashable."""
    out = [kernel, extra]
    for key, a in [(None, a) for a in args] + sorted(kwargs.items()):
        if isinstance(a, torch.Tensor):
            out.append((key, a.data_ptr(), tuple(a.shape), a.stride(), a.dtype, a.device))
        else:
            try:
                hash(a)
            except TypeError:
                return None
            out.append((key, type(a), a))
    return tuple(out)


class LaunchCache:
    """Prepared launches by call signature, least recently used first out."""

    def __init__(self, size: int = 512):
        import collections

        self.size, self._d = size, collections.OrderedDict()

    def get(self, sig):
        go = self._d.get(sig) if sig is not None else None
        if go is not None:
            self._d.move_to_end(sig)
        return go

    def put(self, sig, go):
        if sig is None:
            return
        self._d[sig] = go
        if len(self._d) > self.size:
            self._d.popitem(last=False)


class InterpBackend(Backend):
    """The reference interpreter: runs anywhere torch does, slowly, and defines the answers."""

    name = "interp"
    gemm_b_kmajor = True  # loads follow any strides

    def available(self):
        return True, f"torch {torch.__version__}"

    def serves(self, device):
        return True

    def supports(self, kernel: str, **problem) -> bool:
        # The reference runs the deterministic split backward (no atomics); the fused kernel's own
        # semantics are checked against it directly (tests/test_attention_fused.py).
        return kernel != "attention_bwd_fused"

    def config(self, kernel: str, **problem) -> dict:
        # Smaller blocks than the GPU backends use: fewer wasted rows on the CPU for short inputs.
        if kernel == "attention_fwd":
            return {"BM": 64, "BN": 64}
        if kernel in ("attention_bwd_dkdv", "attention_bwd_dq"):
            return {"BM": 64, "BN": 64}
        if kernel == "gemm":
            return {"BM": 64, "BN": 64, "BK": 64}
        return {}

    def launch(self, kfn: KernelFn, *args, **kwargs) -> None:
        bound = kfn.bind(*args, **kwargs)
        k = kfn.trace(*args, **kwargs)
        tensors = {p.name: bound.arguments[p.name] for p in k.params}
        device: Optional[torch.device] = next((t.device for t in tensors.values()), torch.device("cpu"))
        interp.run(k, tensors, kfn.runtime_env(k, bound), device)
