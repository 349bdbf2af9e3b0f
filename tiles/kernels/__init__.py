"""The kernel suite, written once against the tile language. No file here names a vendor."""
from .attention import attention_bwd_dkdv, attention_bwd_dq, attention_bwd_fused, attention_bwd_prep, attention_fwd
from .gemm import gemm
from .gemm_fp8 import gemm_fp8, gemm_fp8_rowwise
from .layernorm import layernorm
from .rotary import rotary

SUITE = {
    "gemm": gemm,
    "gemm_fp8": gemm_fp8,
    "gemm_fp8_rowwise": gemm_fp8_rowwise,
    "attention_fwd": attention_fwd,
    "attention_bwd_prep": attention_bwd_prep,
    "attention_bwd_dkdv": attention_bwd_dkdv,
    "attention_bwd_dq": attention_bwd_dq,
    "attention_bwd_fused": attention_bwd_fused,
    "layernorm": layernorm,
    "rotary": rotary,
}
