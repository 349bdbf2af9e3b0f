"""Element types of tiles, with the names kernel writers use (bf16, f16, f32)."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DType:
    name: str  # short name used in the IR text and in generated code comments
    torch: torch.dtype
    bytes: int

    def __repr__(self) -> str:
        return self.name


bf16 = DType("bf16", torch.bfloat16, 2)
f16 = DType("f16", torch.float16, 2)
f32 = DType("f32", torch.float32, 4)
i32 = DType("i32", torch.int32, 4)
# 8-bit floats, 4 exponent and 3 mantissa bits, in the two encodings tensor cores use: the OCP
# format (no infinities, one NaN pattern per sign) and the "fnuz" one (exponent bias 8, no negative
# zero, 0x80 is the only NaN). Which machine takes which is the backend's business.
f8e4m3 = DType("f8e4m3", torch.float8_e4m3fn, 1)
f8e4m3fnuz = DType("f8e4m3fnuz", torch.float8_e4m3fnuz, 1)

ALL = (bf16, f16, f32, i32, f8e4m3, f8e4m3fnuz)
MMA_INPUTS = (bf16, f16)  # the tensor-core input types both vendors share
MMA_INPUTS_FP8 = (f8e4m3, f8e4m3fnuz)  # 8-bit inputs: products are exact in f32; scale after the mma

_BY_TORCH = {d.torch: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}


def from_torch(t: torch.dtype) -> DType:
    try:
        return _BY_TORCH[t]
    except KeyError:
        raise TypeError(f"dtype {t} is not supported by tiles (supported: bf16, f16, f32, int32, float8_e4m3fn, float8_e4m3fnuz)") from None


def as_dtype(x) -> DType:
    """Accept a DType, a torch dtype or a short name."""
    if isinstance(x, DType):
        return x
    if isinstance(x, torch.dtype):
        return from_torch(x)
    if isinstance(x, str) and x in _BY_NAME:
        return _BY_NAME[x]
    raise TypeError(f"cannot interpret {x!r} as a tile dtype (use tiles.bf16, tiles.f16 or tiles.f32)")
