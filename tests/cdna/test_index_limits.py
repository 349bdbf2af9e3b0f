"""The CDNA kernels address memory through buffer resources with 32-bit offsets: each launcher's
argument check refuses, before any launch and with the limit named, an operand (for attention, one
head of it) that spans 2 GiB or more, and passes one just under. Meta tensors: no memory is taken."""
import pytest
import torch

from tiles.backends.cdna.lower import check_gemm_args
from tiles.backends.cdna.lower_attention import (check_attention_args, check_attention_bwd_dkdv_args,
                                                 check_attention_bwd_dq_args)
from tiles.backends.cdna.lower_fp8 import check_fp8_args


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


def _attention(S):
    """q, k, v, out (1, S, 8, 128) bf16: a head spans S * 8 * 128 * 2 bytes = S * 2 KiB."""
    t = meta(1, S, 8, 128)
    return t, t, t, t, meta(1, 8, S, dtype=torch.float32)


@pytest.mark.parametrize("check", ["forward", "dq", "dkdv"])
def test_attention_head_of_2_gib_is_refused(check):
    def run(S):
        q, k, v, o, lse = _attention(S)
        if check == "forward":
            check_attention_args(q, k, v, o, lse, 128)
        elif check == "dq":
            check_attention_bwd_dq_args(q, k, v, q, lse, lse, o, 128)
        else:
            check_attention_bwd_dkdv_args(q, k, v, q, lse, lse, o, o, 128)
    run(2**20 - 1)  # just under 2 GiB a head
    with pytest.raises(ValueError, match="spans >= 2 GiB"):
        run(2**20)


def test_gemm_operand_of_2_gib_is_refused():
    check_gemm_args(2**16, 8192, 8192, 8192, 8192, 8192, elem_out=2)  # C: 2^16 x 8192 x 2 bytes = 1 GiB
    with pytest.raises(ValueError, match="A spans 2147483648 bytes; buffer offsets are 32-bit"):
        check_gemm_args(2**17, 8192, 8192, 8192, 8192, 8192, elem_out=2)


def test_fp8_operand_of_2_gib_is_refused():
    e4 = torch.float8_e4m3fnuz
    M, K = 2**21, 1024  # A: 2 GiB of 1-byte elements

    def run(M):
        A, B = meta(M, K, dtype=e4), meta(256, K, dtype=e4)
        SA, SB = meta(M, K // 128, dtype=torch.float32), meta(2, K // 128, dtype=torch.float32)
        check_fp8_args(A, B, SA, SB, meta(M, 256), "gfx942")
    run(M // 4)
    with pytest.raises(ValueError, match="A spans 2147483648 bytes; buffer offsets are 32-bit"):
        run(M)
