"""The scaled fp8 GEMMs in the benchmark harness: block scales (kernel "gemm_fp8") and row-wise scales
(kernel "gemm_fp8_rowwise").

Inputs are quantized the DeepSeek-V3 way from random normal data: one scale per 1 x 128 block of A
and per 128 x 128 block of B (the block's max |x| over 448, e4m3's largest finite value). Impls:

* tiles            tiles.gemm_fp8 on K-major A (M x K) and B (N x K);
* tiles_kmajor_copy the same problem in the transposed storage (A as K x M, B as K x N, scales
                   K-block-major) passed as views: the Hopper path makes K-major copies per call, and
                   this row's time includes them;
* scaled_mm_rowwise torch._scaled_mm with one scale per row of A and per column of B (the scaling
                   cuBLASLt offers on Hopper; a different function, checked against its own reference);
* scaled_mm_blockwise torch._scaled_mm with 1x128 / 128x128 block scales, where this torch has them;
* cublas_bf16      torch.matmul on the dequantized operands in bf16.

The "gemm_fp8_rowwise" rows take the same fp8 operands with the row-wise scales, like for like:
* tiles            tiles.gemm_fp8 with a_scale (M, 1) and b_scale (1, N);
* scaled_mm_rowwise the same timing as in the "gemm_fp8" rows (one interleaved run times them all).

Correctness (TESTING.md): E(C) <= 2 E(C_lp) + fl against the float64 dequantized product, C_lp the
bf16 matmul of the dequantized operands; rows that fail are reported `correct: false` and not timed.
"""
from __future__ import annotations

import torch

from tiles.core.backend import BackendUnavailable

FP8_MAX = 448.0
BLOCK = 128

SHAPES = [dict(M=1024, N=1536, K=7168), dict(M=1024, N=4608, K=7168), dict(M=6144, N=7168, K=2304),
          dict(M=6144, N=1536, K=7168), dict(M=8192, N=8192, K=8192)]


def fp8_shapes(suite: str):
    if suite == "decode":
        return []
    if suite == "tiny":
        return [dict(M=256, N=256, K=512)]
    return list(SHAPES)


def _pad_to(x, rows, cols):
    return torch.nn.functional.pad(x, (0, cols - x.shape[1], 0, rows - x.shape[0]))


def quantize(x: torch.Tensor, block_rows: int, dtype=torch.float8_e4m3fn):
    """x (R, C) float → (x8, scales (cdiv(R, br), cdiv(C, 128))) with x ≈ x8 * scale per block."""
    R, C = x.shape
    Rb, Cb = -(-R // block_rows), -(-C // BLOCK)
    xp = _pad_to(x.float(), Rb * block_rows, Cb * BLOCK).view(Rb, block_rows, Cb, BLOCK)
    amax = xp.abs().amax(dim=(1, 3)).clamp_min(1e-4)
    s = amax / FP8_MAX
    x8 = (xp / s[:, None, :, None]).view(Rb * block_rows, Cb * BLOCK)[:R, :C].to(dtype)
    return x8, s.contiguous()


def dequantize(x8, s, block_rows):
    R, C = x8.shape
    e = s.repeat_interleave(block_rows, 0)[:R].repeat_interleave(BLOCK, 1)[:, :C]
    return x8.to(e.dtype) * e


def make_set(M, N, K, device, seed):
    g = torch.Generator(device=device).manual_seed(seed)
    a8, sa = quantize(torch.randn(M, K, generator=g, device=device), 1)
    b8, sb = quantize(torch.randn(N, K, generator=g, device=device), BLOCK)
    x = dict(a=a8, b=b8, sa=sa, sb=sb)
    # the transposed storage of the same problem (what a K x M / K x N producer hands over)
    x.update(a_km=a8.t().contiguous(), b_kn=b8.t().contiguous(), sa_km=sa.t().contiguous(), sb_kn=sb.t().contiguous())
    x.update(a_bf=dequantize(a8, sa, 1).to(torch.bfloat16), b_bf=dequantize(b8, sb, BLOCK).to(torch.bfloat16))
    # row-wise scales for _scaled_mm: one per row of A, one per column of B (= row of B^T)
    x.update(sa_row=sa[:, :1].contiguous(), sb_row=sb[:, :1].repeat_interleave(BLOCK, 0)[:N].t().contiguous())
    return x


def reference(x):
    return dequantize(x["a"], x["sa"].double(), 1) @ dequantize(x["b"], x["sb"].double(), BLOCK).T


def error_and_bound(out, x):
    """TESTING.md's rule for an fp8 GEMM's output: its largest error against the float64 reference, and
    the bound it must stay within, 2 E(C_lp) + fl with C_lp the bf16 matmul of the dequantized operands."""
    ref = reference(x)
    lp = torch.matmul(x["a_bf"], x["b_bf"].t()).double()
    fl = 2 * ((ref + 0.3 - 0.3) - ref).abs().max().item()
    return (out.double() - ref).abs().max().item(), 2 * (lp - ref).abs().max().item() + fl + 1e-9


def reference_rowwise(x):
    return (x["a"].double() * x["sa_row"].double()) @ (x["b"].double() * x["sb_row"].double().t()).T


def lowp_rowwise(x):
    """The row-wise problem's low-precision reference: the bf16 matmul of its dequantized operands."""
    return torch.matmul((x["a"].float() * x["sa_row"]).bfloat16(), (x["b"].float() * x["sb_row"].t()).bfloat16().t())


def error_and_bound_rowwise(out, x):
    """error_and_bound for the row-wise scales (sa_row, sb_row)."""
    ref = reference_rowwise(x)
    fl = 2 * ((ref + 0.3 - 0.3) - ref).abs().max().item()
    return (out.double() - ref).abs().max().item(), 2 * (lowp_rowwise(x).double() - ref).abs().max().item() + fl + 1e-9


ROWWISE = ("tiles_rowwise", "scaled_mm_rowwise")  # checked against the row-wise reference


def impls(device, backend, skipped: dict) -> dict:
    import tiles

    out = {
        "tiles": lambda x: tiles.gemm_fp8(x["a"], x["b"], x["sa"], x["sb"], backend=backend),
        "tiles_kmajor_copy": lambda x: tiles.gemm_fp8(x["a_km"].t(), x["b_kn"].t(), x["sa_km"].t(), x["sb_kn"].t(),
                                                      backend=backend),
        "tiles_rowwise": lambda x: tiles.gemm_fp8(x["a"], x["b"], x["sa_row"], x["sb_row"], backend=backend),
    }
    if device.type == "cuda" and not torch.version.hip:
        out["scaled_mm_rowwise"] = lambda x: torch._scaled_mm(x["a"], x["b"].t(), scale_a=x["sa_row"],
                                                              scale_b=x["sb_row"], out_dtype=torch.bfloat16)
        out["scaled_mm_blockwise"] = _blockwise()
    out["cublas_bf16" if device.type == "cuda" else "torch_cpu_bf16"] = lambda x: torch.matmul(x["a_bf"], x["b_bf"].t())
    return out


def _blockwise():
    """torch._scaled_mm with 1x128 / 128x128 block scales (newer torch, CUDA 12.9+): scale_a is
    (M, K/128), scale_b (K/128, N/128); which strides a build accepts is tried once, in this order."""
    forms = [lambda x: (x["sa_km"].t(), x["sb"].t()), lambda x: (x["sa_km"].t(), x["sb_kn"]),
             lambda x: (x["sa"], x["sb"].t()), lambda x: (x["sa"], x["sb_kn"])]
    chosen = []

    def run(x):
        if chosen:
            sa, sb = chosen[0](x)
            return torch._scaled_mm(x["a"], x["b"].t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        err = None
        for f in forms:
            sa, sb = f(x)
            try:
                c = torch._scaled_mm(x["a"], x["b"].t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
            except (RuntimeError, ValueError, TypeError) as e:
                err = e
                continue
            chosen.append(f)
            return c
        raise err
    return run


def bench_gemm_fp8(s, device, backend, reps, budget, progress) -> list:
    from . import shapes
    from .run import _errors, _fill_times, _fl, _n_sets, time_interleaved

    M, N, K = s["M"], s["N"], s["K"]
    n = _n_sets(7 * (M * K + N * K) + 2 * M * N, device)
    sets = [make_set(M, N, K, device, 3000 + i) for i in range(n)]
    skipped = {}
    fns = impls(device, backend, skipped)
    x0 = sets[0]
    ref, ref_row = reference(x0), reference_rowwise(x0)
    lp = torch.matmul(x0["a_bf"], x0["b_bf"].t())
    lp_row = lowp_rowwise(x0)
    bound = _errors(lp, ref)[0] * 2 + _fl(ref) + 1e-6
    bound_row = _errors(lp_row, ref_row)[0] * 2 + _fl(ref_row) + 1e-6
    rows, ok = [], {}
    for name, fn in fns.items():
        row = dict(kernel="gemm_fp8", shape=s, impl=name)
        try:
            c = fn(x0)
        except Exception as e:  # a baseline this torch lacks (e.g. block-scaled _scaled_mm)
            why = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            if name.startswith("tiles") and not isinstance(e, BackendUnavailable):
                row.update(correct=False, failed=why)  # tiles failing is a wrong result, never a skip
            else:
                row.update(correct=None, skipped=why)
            rows.append(row)
            continue
        r, b = (ref_row, bound_row) if name in ROWWISE else (ref, bound)
        e = _errors(c, r)[0]
        row.update(correct=e <= b, max_err=e, err_bound=b)
        rows.append(row)
        if row["correct"]:
            ok[name] = fn
    del ref, ref_row, lp, lp_row
    times = time_interleaved(ok, sets, device, reps, budget)
    for row in rows:
        if times.get(row["impl"]):
            _fill_times(row, times[row["impl"]], shapes.gemm_flops(s), device)
    # the like-for-like row-wise rows: tiles' row-wise kernel as "tiles", beside the same _scaled_mm timing
    rows = [r for r in rows if r["impl"] != "tiles_rowwise"] + \
        [dict(r, kernel="gemm_fp8_rowwise", impl="tiles" if r["impl"] == "tiles_rowwise" else r["impl"])
         for r in rows if r["impl"] in ROWWISE]
    progress(rows)
    return rows
