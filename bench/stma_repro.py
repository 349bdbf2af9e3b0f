"""Session 27: one scales_tma launch at a small shape, with variations of its scale tensor maps, to find
what makes the A-scale copy an illegal instruction. Run each variation in its own process.

    python3 bench/stma_repro.py M N K VARIANT   (VARIANT: kk, mn, kk_nopromo, kk_box8)"""
import ctypes
import sys

import torch

from tiles.backends.hopper import lower_fp8, runtime
from tiles.bench import fp8

M, N, K = (int(v) for v in sys.argv[1:4])
variant = sys.argv[4]
x = fp8.make_set(M, N, K, torch.device("cuda"), 1)
sa, sb = (x["sa_km"].t(), x["sb_kn"].t()) if variant == "mn" else (x["sa"], x["sb"])
form = lower_fp8.scales_tma_form(sa, sb.unsqueeze(1).expand(sb.shape[0], 128, sb.shape[1]))
print(variant, "form", form, flush=True)
orig = runtime.tensor_map


def patched(t, box, swizzle=128, dims=None, strides=None):
    if swizzle or variant == "mn":
        return orig(t, box, swizzle, dims, strides)
    cu = runtime._cu()
    if variant == "kk_box8" and box[0] == 4 and box[1] > 2:
        box = (8, box[1])
    promo = cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE if variant == "kk_nopromo" else \
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B
    print("  map", list(dims), list(strides), list(box), flush=True)
    tm = runtime._ok(cu.cuTensorMapEncodeTiled(
        runtime._tma_dtype(t.dtype), len(dims), t.data_ptr(), [cu.cuuint64_t(int(d)) for d in dims],
        [cu.cuuint64_t(int(s) * 4) for s in strides[1:]], [cu.cuuint32_t(int(b)) for b in box],
        [cu.cuuint32_t(1)] * len(dims), cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE, promo,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "encode")
    return (ctypes.c_ubyte * 128).from_buffer_copy(bytes((ctypes.c_ubyte * 128).from_address(tm.getPtr())))


runtime.tensor_map = patched
orig_source = lower_fp8.fp8_source


def source(*a, **kw):
    k = orig_source(*a, **kw)
    if variant == "kk_box8" and kw.get("scales_tma"):
        k = dict(k, source=k["source"].replace("SA_STEP = 4,", "SA_STEP = 8,"), name=k["name"] + "_box8")
        k["source"] = k["source"].replace("tiles_gemm_fp8_bf16_128x128x128_s6_g8_regs_ov_stkk(",
                                          "tiles_gemm_fp8_bf16_128x128x128_s6_g8_regs_ov_stkk_box8(")
        k["smem"] += 6 * 2048
    return k


lower_fp8.fp8_source = source
go0, out0 = lower_fp8.launcher(x["a"], x["b"], sa, sb, epilogue="regs")
go0()
torch.cuda.synchronize()
go, out = lower_fp8.launcher(x["a"], x["b"], sa, sb, epilogue="regs", **form)
go()
torch.cuda.synchronize()
print(variant, "tma ok, bitwise:", torch.equal(out, out0), flush=True)
