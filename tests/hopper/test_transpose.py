"""K-major copies of MN-major fp8 operands (transpose.py, templates/transpose_bytes.cu): the kernel
compiles without spills on the CPU; on an sm_90 GPU its copies equal torch's at awkward shapes,
strides and alignments, with rows padded to 16 bytes for TMA."""
from __future__ import annotations

import pytest
import torch

import needs  # tests/hopper is on sys.path
from tiles.backends.hopper import transpose


def test_kernel_compiles_without_spills(tmp_path):
    runtime = needs.nvrtc()
    from test_compile import assert_no_spills

    c = runtime.compile_cuda(transpose.SOURCE.read_text(), name=transpose.SOURCE.name, cache=False)
    assert_no_spills(c, transpose.ENTRY, tmp_path)


@pytest.mark.parametrize("X,K,ld,offset", [(1, 1, 1, 0), (5, 3, 7, 0), (64, 64, 64, 0), (130, 65, 131, 1),
                                           (67, 130, 67, 3), (7, 200, 9, 0), (4608, 7168, 4608, 0),
                                           (1000, 300, 1024, 2)])
def test_copies_equal_torch_on_the_gpu(X, K, ld, offset):
    needs.hopper_gpu()
    g = torch.Generator(device="cuda").manual_seed(X * K + ld)
    store = torch.randint(0, 256, (K * ld + offset,), dtype=torch.uint8, device="cuda", generator=g)
    t = store[offset:].as_strided((X, K), (1, ld))  # X x K stored as K rows of ld bytes, X contiguous: MN-major
    for dtype in (torch.uint8, torch.float8_e4m3fn):
        x = t.view(dtype)
        got = transpose.kmajor(x)
        assert got.dtype == dtype and got.shape == (X, K) and got.stride(1) == 1 and got.stride(0) % 16 == 0
        assert torch.equal(got.view(torch.uint8), x.view(torch.uint8).contiguous())
    # strided both ways (neither axis contiguous): torch's copy
    y = torch.randint(0, 256, (2 * K, 2 * X), dtype=torch.uint8, device="cuda", generator=g)[::2, ::2].t()
    assert y.stride(0) == 2 and torch.equal(transpose.kmajor(y), y.contiguous())
