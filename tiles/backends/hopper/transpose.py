"""K-major copies of fp8 operands stored MN-major (templates/transpose_bytes.cu).

Hopper's fp8 wgmma reads A and B K-major from shared memory only, so tiles.gemm_fp8 hands it a K-major
copy of an operand whose K axis is not the contiguous one (the challenge's A as K x M, B as K x N).
torch's strided copy moves those single bytes at a few hundred GB/s; this kernel moves words.
"""
from __future__ import annotations

from . import gemm_probe, runtime

SOURCE = gemm_probe.TEMPLATES / "transpose_bytes.cu"
ENTRY = "tiles_transpose_bytes"
TILE = 64
_loaded: dict = {}  # device -> the loaded kernel


def _kernel():
    import torch

    dev = torch.cuda.current_device()
    if dev not in _loaded:  # compiled once (disk-cached) and loaded once per device
        _loaded[dev] = runtime.load(runtime.compile_cuda(SOURCE.read_text(), name=SOURCE.name).cubin, ENTRY)
    return _loaded[dev]


def kmajor(t):
    """A copy of the 2-D tensor t (X x K, 1-byte elements) with K contiguous and rows padded to 16 bytes
    (a view of the first K columns), for t stored MN-major (t.stride(0) == 1). Other strides take
    torch's copy."""
    import torch

    if t.dim() != 2 or t.element_size() != 1 or t.stride(0) != 1 or not t.is_cuda or t.shape[1] > 65535 * TILE:
        return t.contiguous()
    X, K = t.shape
    src = t.view(torch.uint8).t()  # K x X, rows of X contiguous bytes
    ld_out = -(-K // 16) * 16
    out = torch.empty(X, ld_out, dtype=torch.uint8, device=t.device)
    if X and K:
        ld_in = src.stride(0)
        words = src.data_ptr() % 4 == 0 and ld_in % 4 == 0 and ld_out % 4 == 0
        args = [runtime.arg_ptr(src), runtime.arg_i64(ld_in), runtime.arg_ptr(out), runtime.arg_i64(ld_out),
                runtime.arg_i32(K), runtime.arg_i32(X), runtime.arg_i32(int(words))]
        _kernel().launch((-(-X // TILE), -(-K // TILE)), (256,), args)
    return out[:, :K].view(t.dtype)
