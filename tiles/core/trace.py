"""@tiles.kernel: trace a Python function into IR, once per specialization.

Arguments are classified by their Python value: tensors become global parameters (their dtype and
rank specialize the kernel, sizes and strides stay run-time values), floats become run-time scalars,
and everything else (bools, ints, strings) is a compile-time constant that specializes the kernel.
None is an optional tensor left out: it specializes the kernel too, without naming it.
"""
from __future__ import annotations

import inspect
import threading
from typing import Callable, Optional, Union

import torch

from . import ir, lang
from .dtypes import from_torch
from .patterns import Pattern, Pipelined


def _is_tensor(x) -> bool:
    return isinstance(x, torch.Tensor) or hasattr(x, "__dlpack__")


class KernelFn:
    def __init__(self, fn: Callable, overlap: Union[Pattern, Callable[..., Pattern], None]):
        self.fn = fn
        self.name = fn.__name__
        self.overlap = overlap or Pipelined(2)
        self.signature = inspect.signature(fn)
        self._cache: dict = {}
        self._lock = threading.Lock()
        self.__doc__ = fn.__doc__

    def __repr__(self):
        return f"<tiles.kernel {self.name}>"

    def bind(self, *args, **kwargs) -> inspect.BoundArguments:
        bound = self.signature.bind(None, *args, **kwargs)
        bound.apply_defaults()
        return bound

    def spec_key(self, bound) -> tuple:
        key = []
        for name, v in list(bound.arguments.items())[1:]:
            if _is_tensor(v):
                key.append((name, "tensor", str(v.dtype), v.dim()))
            elif isinstance(v, float):
                key.append((name, "float"))
            else:
                key.append((name, "const", v))
        return tuple(key)

    def trace(self, *args, **kwargs) -> ir.Kernel:
        """The IR of this kernel specialized for these arguments (cached)."""
        bound = self.bind(*args, **kwargs)
        key = self.spec_key(bound)
        with self._lock:
            k = self._cache.get(key)
            if k is None:
                k = self._trace(bound)
                self._cache[key] = k
        return k

    def _trace(self, bound) -> ir.Kernel:
        params, scalars, consts, call_args = [], [], {}, {}
        for name, v in list(bound.arguments.items())[1:]:
            if _is_tensor(v):
                p = ir.Param(name, v.dim(), from_torch(v.dtype))
                params.append(p)
                call_args[name] = lang.GlobalArg(p)
            elif isinstance(v, float):
                s = ir.Sym(name, "arg", float_=True)
                scalars.append(s)
                call_args[name] = s
            elif v is None:  # an optional tensor left out: not a compile-time value of the kernel's name
                call_args[name] = None
            else:
                consts[name] = v
                call_args[name] = v
        pattern = self.overlap(**consts) if callable(self.overlap) and not isinstance(self.overlap, Pattern) else self.overlap
        b = lang.Builder(self.name, pattern)
        prev = getattr(lang._state, "builder", None)
        lang._state.builder = b
        try:
            self.fn(b, **call_args)
        finally:
            lang._state.builder = prev
        return b.finish(self.name, params, scalars, consts, (self.fn.__doc__ or "").strip())

    def runtime_env(self, kernel: ir.Kernel, bound) -> dict:
        """Values of every run-time symbol for one launch: dims, strides, float scalars."""
        env = {}
        for p in kernel.params:
            t = bound.arguments[p.name]
            for i in range(p.rank):
                env[p.dims[i].name] = int(t.shape[i])
                env[p.strides[i].name] = int(t.stride(i))
        for s in kernel.scalars:
            env[s.name] = float(bound.arguments[s.name])
        return env


def kernel(fn: Optional[Callable] = None, *, overlap=None):
    """Declare a tile kernel. `overlap` is a Pattern, or a function of the constexpr arguments
    returning one."""
    if fn is None:
        return lambda f: KernelFn(f, overlap)
    return KernelFn(fn, overlap)
