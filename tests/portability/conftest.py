"""The shared suite runs on every backend that is present: the interpreter always, GPU backends
when their hardware is here. Each test gets (backend name, device)."""
import pytest
import torch

from tiles import backends


# cdna-emu runs the CDNA backend's kernels on an NVIDIA GPU, once per CDNA target
GPU_BACKENDS = ("hopper", "cdna", "cdna-emu:gfx942", "cdna-emu:gfx950")


def _present():
    out = [pytest.param(("interp", "cpu"), id="interp")]
    for name in GPU_BACKENDS:
        b = backends.get(name)
        ok, why = b.available()
        if ok and torch.cuda.is_available() and b.serves(torch.device("cuda")):
            out.append(pytest.param((name, "cuda"), id=name.replace(":", "-")))
        else:
            out.append(pytest.param((name, "cuda"), id=name.replace(":", "-"),
                                    marks=pytest.mark.skip(reason=f"backend {name} not present: {why}")))
    return out


# Tests that also differentiate attention need the backward kernels too.
BACKWARD = ("attention_bwd_prep", "attention_bwd_dkdv", "attention_bwd_dq")
ENTRY_KERNELS = {"gemm_fp8_rowwise": ("gemm_fp8_rowwise",), "gemm_fp8": ("gemm_fp8",), "gemm": ("gemm",),
                 "layernorm": ("layernorm",), "rotary": ("rotary",)}
# (first match wins: each name ahead of its prefixes)


def _needed(request) -> tuple:
    name = request.node.name
    for prefix, ks in ENTRY_KERNELS.items():
        if name.startswith(f"test_{prefix}"):
            return ks + (("gemm",) if "backward" in name else ())
    if request.node.fspath.basename == "test_attention_varlen.py":
        return ("attention_fwd",) + (BACKWARD if any(w in name for w in ("backward", "sinks")) else ())
    if request.node.fspath.basename == "test_attention.py":
        grads = any(w in name for w in ("backward", "grad", "non_contiguous", "sliding_window", "sinks"))
        return ("attention_fwd",) + (BACKWARD if grads else ())
    return ()


@pytest.fixture(params=_present())
def backend(request):
    """(name, device). A backend that does not lower a kernel this test needs yet is skipped with the
    names of the missing lowerings, so the gap shows in every report."""
    name, device = request.param
    missing = [k for k in _needed(request) if not backends.get(name).supports(k)]
    if missing:
        pytest.skip(f"backend {name} does not lower {missing} yet")
    return request.param
