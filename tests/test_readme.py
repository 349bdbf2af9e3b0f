"""The README's kernel is real: it traces, and runs on the interpreter to the right answer."""
import pathlib
import re

import torch

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_kernel_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    src = next(b for b in blocks if "@tiles.kernel" in b)
    ns: dict = {}
    exec(compile(src, "README.md", "exec"), ns)
    a = torch.randn(100, 70).to(torch.bfloat16)
    b = torch.randn(70, 90).to(torch.bfloat16)
    c = torch.full((100, 90), float("nan"))
    from tiles import backends

    backends.get("interp").launch(ns["gemm"], a, b, c, BM=64, BN=64, BK=32)
    ref = a.double() @ b.double()
    assert (c.double() - ref).abs().max() < 1e-3 * ref.abs().max()
