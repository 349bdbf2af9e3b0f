"""The shared suite runs on every backend that is present: the interpreter always, GPU backends
when their hardware is here. Each test gets (backend name, device)."""
import pytest
import torch

from tiles import backends


def _present():
    out = [pytest.param(("interp", "cpu"), id="interp")]
    for name in ("hopper", "cdna"):
        b = backends.get(name)
        ok, why = b.available()
        if ok and torch.cuda.is_available() and b.serves(torch.device("cuda")):
            out.append(pytest.param((name, "cuda"), id=name))
        else:
            out.append(pytest.param((name, "cuda"), id=name,
                                    marks=pytest.mark.skip(reason=f"backend {name} not present: {why}")))
    return out


@pytest.fixture(params=_present())
def backend(request):
    return request.param
