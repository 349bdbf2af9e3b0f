"""What a Hopper test needs, or it skips with the reason: NVRTC that loads (compile tests), an sm_90 GPU
with the hopper backend (GPU tests)."""
from __future__ import annotations

import pytest


def nvrtc():
    """tiles.backends.hopper.runtime, with NVRTC loadable; else skip."""
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-python (cuda.bindings.nvrtc) is not installed")
    from tiles.backends.hopper import runtime

    try:
        runtime.nvrtc_version()
    except Exception as e:  # noqa: BLE001  (the bindings import but libnvrtc is missing)
        pytest.skip(f"NVRTC is not loadable: {e}")
    return runtime


def hopper_gpu():
    """The hopper backend, on an sm_90 GPU; else skip."""
    import torch

    from tiles import backends

    ok, why = backends.get("hopper").available()
    if not (ok and torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)):
        pytest.skip(f"needs an sm_90 GPU with the hopper backend ({why or 'no sm_90 device'})")
    return backends.get("hopper")
