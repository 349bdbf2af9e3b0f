"""K-major copies of MN-major fp8 operands (transpose.py, templates/transpose_bytes.cu): the kernel
compiles without spills on the CPU, moving 16-byte vectors; on an sm_90 GPU its copies equal torch's at
awkward shapes, strides and alignments (16-, 4- and 1-byte aligned rows), with rows padded to 16 bytes
for TMA, one matrix a launch or two."""
from __future__ import annotations

import pytest
import torch

import needs  # tests/hopper is on sys.path
from sass import disassemble
from tiles.backends.hopper import transpose


def test_kernel_compiles_without_spills(tmp_path):
    runtime = needs.nvrtc()
    from test_compile import assert_no_spills

    c = runtime.compile_cuda(transpose.SOURCE.read_text(), name=transpose.SOURCE.name, cache=False)
    assert_no_spills(c, transpose.ENTRY, tmp_path)
    sass = disassemble(c.cubin, tmp_path)
    assert "LDG.E.128" in sass and "STG.E.128" in sass and "LDS.128" in sass and "PRMT" in sass


def _mn_major(X, K, ld, offset, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    store = torch.randint(0, 256, (K * ld + offset,), dtype=torch.uint8, device="cuda", generator=g)
    return store[offset:].as_strided((X, K), (1, ld))  # X x K stored as K rows of ld bytes, X contiguous


@pytest.mark.parametrize("X,K,ld,offset", [(1, 1, 1, 0), (5, 3, 7, 0), (64, 64, 64, 0), (130, 65, 131, 1),
                                           (67, 130, 67, 3), (7, 200, 9, 0), (4608, 7168, 4608, 0),
                                           (1000, 300, 1024, 2), (1000, 300, 1000, 0), (136, 259, 140, 4),
                                           (300, 1000, 304, 16)])
def test_copies_equal_torch_on_the_gpu(X, K, ld, offset):
    needs.hopper_gpu()
    t = _mn_major(X, K, ld, offset, X * K + ld)
    g = torch.Generator(device="cuda").manual_seed(X + K)
    for dtype in (torch.uint8, torch.float8_e4m3fn):
        x = t.view(dtype)
        got = transpose.kmajor(x)
        assert got.dtype == dtype and got.shape == (X, K) and got.stride(1) == 1 and got.stride(0) % 16 == 0
        assert torch.equal(got.view(torch.uint8), x.view(torch.uint8).contiguous())
    # strided both ways (neither axis contiguous): torch's copy
    y = torch.randint(0, 256, (2 * K, 2 * X), dtype=torch.uint8, device="cuda", generator=g)[::2, ::2].t()
    assert y.stride(0) == 2 and torch.equal(transpose.kmajor(y), y.contiguous())


def test_two_matrices_in_one_launch_on_the_gpu():
    """kmajor_all: two MN-major matrices of different shapes and alignments in one launch (the grid covers
    the larger one), and a K-major one beside them taking torch's copy."""
    needs.hopper_gpu()
    for a, b in (((1024, 7168, 1024, 0), (1536, 7168, 1536, 0)), ((300, 129, 301, 1), (70, 1000, 72, 4)),
                 ((5000, 64, 5000, 0), (64, 3000, 64, 0))):
        x, y = _mn_major(*a, 1), _mn_major(*b, 2)
        z = torch.randint(0, 256, (33, 65), dtype=torch.uint8, device="cuda")
        got = transpose.kmajor_all([x, y, z])
        assert [g.shape for g in got] == [x.shape, y.shape, z.shape]
        for g, t in zip(got, (x, y, z)):
            assert torch.equal(g, t.contiguous())


@pytest.mark.parametrize("M,N,K", [(1024, 1536, 7168), (300, 129, 1000), (1000, 1000, 2048), (77, 4608, 384)])
def test_the_challenge_layout_through_gemm_fp8_on_the_gpu(M, N, K):
    """tiles.gemm_fp8 with A as K x M and B as K x N (views): the copies, both in one launch, feed the same
    kernel as the K-major call, so the outputs agree to the bit."""
    needs.hopper_gpu()
    import tiles
    from tiles.bench import fp8

    x = fp8.make_set(M, N, K, torch.device("cuda"), M + N + K)
    kmajor = tiles.gemm_fp8(x["a"], x["b"], x["sa"], x["sb"])
    transposed = tiles.gemm_fp8(x["a_km"].t(), x["b_kn"].t(), x["sa_km"].t(), x["sb_kn"].t())
    assert torch.equal(kmajor, transposed)
    err, bound = fp8.error_and_bound(transposed, x)
    assert err <= bound, (err, bound)
