"""The backend registry. Vendor backends are imported lazily so a CPU install never loads them."""
from __future__ import annotations

import importlib

import torch

from tiles.core.backend import Backend, BackendUnavailable, InterpBackend

# name -> "module:Class"; each vendor package exposes one Backend subclass.
_REGISTRY = {
    "interp": None,
    "hopper": "tiles.backends.hopper.backend:HopperBackend",
    "cdna": "tiles.backends.cdna.backend:CDNABackend",
    # the CDNA backend's kernels on an NVIDIA GPU through an emulated arch layer (tests only);
    # "cdna-emu" targets gfx942, "cdna-emu:gfx950" the other target
    "cdna-emu": "tiles.backends.cdna_emu.backend:CDNAEmuBackend",
}
# backends built per target: NAME:ARCH
_TARGETED = {"cdna-emu": ("gfx942", "gfx950")}
_loaded: dict = {}


def names() -> list:
    return list(_REGISTRY)


def get(name: str) -> Backend:
    base, _, target = name.partition(":")
    if base not in _REGISTRY or (target and target not in _TARGETED.get(base, ())):
        targeted = [f"{b}:{t}" for b, ts in _TARGETED.items() for t in ts]
        raise ValueError(f"backend={name!r} is not a tiles backend; choose one of {names() + targeted}")
    if base in _TARGETED and target == _TARGETED[base][0]:
        name = base  # the default target has the plain name
    if name not in _loaded:
        spec = _REGISTRY[base]
        if spec is None:
            _loaded[name] = InterpBackend()
        else:
            mod, cls = spec.split(":")
            try:
                make = getattr(importlib.import_module(mod), cls)
                _loaded[name] = make(target) if target else make()
            except ImportError as e:  # the package of that vendor is not written or not installed
                _loaded[name] = _Missing(name, f"{type(e).__name__}: {e}")
    return _loaded[name]


class _Missing(Backend):
    def __init__(self, name, why):
        self.name, self._why = name, why

    def available(self):
        return False, self._why

    def serves(self, device):
        return False

    def supports(self, kernel, **problem):
        return False


def for_device(device: torch.device, kernels=()) -> Backend:
    """The best backend for tensors on `device`: a vendor backend that serves it and lowers every one
    of `kernels`, else the interpreter (`tiles info` lists what each backend lowers)."""
    if device.type == "cuda":
        for name in ("hopper", "cdna"):
            b = get(name)
            if b.available()[0] and b.serves(device) and all(b.supports(k) for k in kernels):
                return b
    return get("interp")


def resolve(backend, device: torch.device, kernels=()) -> Backend:
    """Turn the `backend=` argument of a public entry point into a Backend, checked for `device`
    and for the suite kernels the entry point runs."""
    if backend is None:
        return for_device(device, kernels)
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a str or None, got {type(backend).__name__}")
    b = get(backend)
    b.check(device)
    missing = [k for k in kernels if not b.supports(k)]
    if missing:
        raise BackendUnavailable(f"backend={backend!r} does not lower {missing} yet; use backend='interp' "
                                 f"(or leave backend=None to pick one that does)")
    return b


__all__ = ["Backend", "BackendUnavailable", "get", "names", "for_device", "resolve"]
