"""tiles: a GPU kernel declared once as tiles, bulk ops, async loads and an overlap pattern, lowered
to NVIDIA Hopper and AMD CDNA.

    import tiles
    out = tiles.attention(q, k, v, causal=True)
    c = tiles.gemm(a, b)
"""
from ._version import __version__
from .core.dtypes import bf16, f16, f32, f8e4m3, f8e4m3fnuz
from .core.lang import (TileError, abs, add, add_col, add_row, cast, col_max, col_sum, copy, div, div_col,
                        div_row, exp, exp2, fill, fill_where, load, load_async, log, log2, mask_causal,
                        mask_cols, mask_rows, mask_window, max, min, mma, mul, mul_col, mul_row, neg, row_max,
                        row_sum, rsqrt, store, store_add, sub, sub_col, sub_row, wait, zero)
from .core.patterns import Interleave, Pipelined, PingPong, ProducerConsumer
from .core.trace import kernel
from .core.backend import BackendUnavailable
from .api import attention, attention_varlen, gemm, gemm_fp8, layernorm, rotary

__all__ = [
    "__version__", "attention", "attention_varlen", "gemm", "gemm_fp8", "layernorm", "rotary", "kernel", "TileError",
    "BackendUnavailable",
    "bf16", "f16", "f32", "f8e4m3", "f8e4m3fnuz", "Pipelined", "ProducerConsumer", "PingPong", "Interleave",
    "load", "load_async", "wait", "store", "store_add", "mma", "zero", "fill", "cast", "exp", "exp2", "log", "log2",
    "neg", "abs", "rsqrt", "copy", "add", "sub", "mul", "div", "max", "min", "row_max", "row_sum",
    "col_max", "col_sum", "add_row", "sub_row", "mul_row", "div_row", "add_col", "sub_col", "mul_col",
    "div_col", "mask_causal", "mask_window", "mask_cols", "mask_rows", "fill_where",
]
