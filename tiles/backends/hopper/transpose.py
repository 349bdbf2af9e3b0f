"""K-major copies of fp8 operands stored MN-major (templates/transpose_bytes.cu).

Hopper's fp8 wgmma reads A and B K-major from shared memory only, so tiles.gemm_fp8 hands it a K-major
copy of an operand whose K axis is not the contiguous one (the challenge's A as K x M, B as K x N).
torch's strided copy moves those single bytes at a few hundred GB/s; this kernel moves 16-byte vectors,
both operands in one launch.
"""
from __future__ import annotations

from . import gemm_probe, runtime

SOURCE = gemm_probe.TEMPLATES / "transpose_bytes.cu"
ENTRY = "tiles_transpose_bytes"
TILE = 128
_loaded: dict = {}  # device -> the loaded kernel


def _kernel():
    import torch

    dev = torch.cuda.current_device()
    if dev not in _loaded:  # compiled once (disk-cached) and loaded once per device
        _loaded[dev] = runtime.load(runtime.compile_cuda(SOURCE.read_text(), name=SOURCE.name).cubin, ENTRY)
    return _loaded[dev]


def _takes(t) -> bool:
    """Whether the kernel copies t: 2-D, 1-byte elements, stored MN-major, on the GPU, K within the grid."""
    return t.dim() == 2 and t.element_size() == 1 and t.stride(0) == 1 and t.is_cuda and t.shape[1] <= 65535 * TILE


def kmajor(t):
    """A K-major copy of the 2-D tensor t (X x K, 1-byte elements): kmajor_all's, for one tensor."""
    return kmajor_all([t])[0]


def kmajor_all(ts) -> list:
    """K-major copies of the 2-D tensors ts (each X x K, 1-byte elements), with K contiguous and rows padded
    to 16 bytes (views of the first K columns): one launch for every two tensors stored MN-major
    (t.stride(0) == 1); other strides take torch's copy."""
    import torch

    outs, jobs = [], []
    for t in ts:
        if not _takes(t):
            outs.append(t.contiguous())
            continue
        X, K = t.shape
        src = t.view(torch.uint8).t()  # K x X, rows of X contiguous bytes
        out = torch.empty(X, -(-K // 16) * 16, dtype=torch.uint8, device=t.device)
        outs.append(out[:, :K].view(t.dtype))
        if X and K:
            ptr, ld = src.data_ptr(), src.stride(0)
            align = next(a for a in (16, 4, 1) if ptr % a == 0 and ld % a == 0)
            jobs.append((K, X, [runtime.arg_ptr(src), runtime.arg_i64(ld), runtime.arg_ptr(out),
                                runtime.arg_i64(out.stride(0)), runtime.arg_i32(K), runtime.arg_i32(X),
                                runtime.arg_i32(align)]))
    for i in range(0, len(jobs), 2):
        pair = jobs[i:i + 2]  # one matrix: its arguments twice, and the grid's z of 1
        grid = (-(-max(X for _, X, _ in pair) // TILE), -(-max(K for K, _, _ in pair) // TILE), len(pair))
        _kernel().launch(grid, (256,), pair[0][2] + pair[-1][2])
    return outs
