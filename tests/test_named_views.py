"""Global windows in the SIMT lowerings (both vendors): a window fixed for the whole program is declared
once before the first statement, named after its tensor, with its IR text above it; a window that moves
with a loop stays inline in its op."""
import pytest
import torch

import tiles
from tiles import backends
from tiles.kernels import SUITE


@tiles.kernel
def _rows_in_a_loop(k, X, Y, *, BM=4):
    k.grid(1)
    t = k.reg(BM, 64, tiles.f32)
    for i in k.range(3):
        tiles.load(t, X[i, :, :], row=0, col=0)
        tiles.store(Y[:, :], t, row=i * BM, col=0)


@pytest.mark.parametrize("backend", ["hopper", "cdna"])
def test_fixed_windows_declared_once_moving_ones_inline(backend):
    be = backends.get(backend)
    x = torch.empty(2, 300, 8, 128, dtype=torch.bfloat16, device="meta")
    cs = torch.empty(300, 64, dtype=torch.float32, device="meta")
    src = be.lower(SUITE["rotary"], x, cs, cs, x, D=128).source
    assert src.count("const auto gX = ") == 1 and src.count("const auto gY = ") == 1
    assert "// X[pid2, :, pid1, :]\n  const auto gX = " in src
    assert ", gX, pid0 * " in src  # both loads of X read the one window
    x3 = torch.empty(3, 4, 64, dtype=torch.bfloat16, device="meta")
    y = torch.empty(12, 64, dtype=torch.bfloat16, device="meta")
    src = be.lower(_rows_in_a_loop, x3, y).source
    assert "const auto gY = " in src and "const auto gX" not in src  # X[i, :, :] moves with i
    assert ("simt::view2<const bf16>{X + i * X_stride0" in src) if backend == "hopper" else \
        ("simt::window2<dt::bf16>(X, (long long)i * X_stride0" in src)
