"""Session 17: the GEMMs' epilogue, the TMA store they launch with against stores from registers, one
pair a store and 2 or 4 pairs of a row a store (option wide_stores, ops.h store_wide), which made
attention's kernels up to 1.23x faster (0.98-1.23x).

    PYTHONPATH=.:bench python3 bench/epilogue_ab.py [bf16,fp8]

bf16 at the standard suite's GEMM shapes next to torch.matmul (cuBLAS); fp8 at the issue's five shapes
next to row-wise torch._scaled_mm, with one more ring stage where the staging tiles' shared memory
allows it. Each variant's output must equal the launched kernel's to the bit (the same sums in the same
order; only the store differs) or it is reported wrong and not timed. Timing: hopper_gemm_tiles.timed
(CUDA events around 20 launches behind a sleep kernel, interleaved rounds, medians); TFLOP/s.
"""
import sys

import torch

from tiles.backends.hopper import gemm_probe, lower_fp8
from tiles.bench import fp8

import fp8_ab
import hopper_gemm_tiles as ht

BF16_SHAPES = [(1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 8192), (16384, 8192, 8192), (8192, 8192, 2048),
               (4096, 14336, 4096)]
EPILOGUES = {"tma": dict(epilogue="tma", wide_stores=0), "regs": dict(epilogue="regs", wide_stores=0), "regs_wd2": dict(epilogue="regs", wide_stores=2),
             "regs_wd4": dict(epilogue="regs", wide_stores=4)}


def _report(M, N, K, ms, same, base):
    flops = 2 * M * N * K
    print(M, N, K, "bitwise:", same, flush=True)
    print("   ", " ".join(f"{n}={flops / (t * 1e-3) / 1e12:.0f}({ms[base] / t:.3f})" for n, t in ms.items()), flush=True)


def bf16():
    for M, N, K in BF16_SHAPES:
        g = torch.Generator(device="cuda").manual_seed(M + N + K)
        sets = [(torch.randn(M, K, device="cuda", generator=g).bfloat16(),
                 torch.randn(K, N, device="cuda", generator=g).bfloat16()) for _ in range(3)]
        # the tile tiles.gemm picks (lower.py), with the TMA store (its epilogue at 128 x 64 until this
        # measurement; since, 4 pairs a store from registers)
        launched = dict(BN=64, stages=8) if M * N <= 1024 * 1024 else {}
        vs = {"launched": launched, **{n: dict(launched, **e) for n, e in EPILOGUES.items()}}
        fns, outs = {"cublas": lambda i: torch.matmul(*sets[i % 3])}, {}
        for name, over in vs.items():
            gos = [gemm_probe.launcher(x, y, **over) for x, y in sets]
            gos[0][1].fill_(float("nan"))
            gos[0][0]()
            outs[name] = gos[0][1].clone()
            fns[name] = lambda i, gos=gos: gos[i % 3][0]()
        torch.cuda.synchronize()
        same = {n: torch.equal(outs["launched"], o) for n, o in outs.items()}
        ms = ht.timed({n: f for n, f in fns.items() if same.get(n, True)})
        _report(M, N, K, ms, same, "cublas")


def fp8_gemm():
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for M, N, K in fp8_ab.SHAPES:
        sets = [fp8.make_set(M, N, K, torch.device("cuda"), seed) for seed in range(2)]
        cfg = fp8_ab.launched(M, N, K, sms)  # with BN = 128: stores from registers, 4 pairs a store (session 17)
        vs = {"launched": cfg, **{n: dict(cfg, **e) for n, e in EPILOGUES.items()}}
        src = lower_fp8.fp8_source(BM=cfg["BM"], BN=cfg["BN"], **{k: v for k, v in cfg.items() if k not in ("BM", "BN")})
        deeper = dict(cfg, epilogue="regs", wide_stores=4, stages=src["cfg"]["stages"] + 1)
        try:
            lower_fp8.fp8_source(BM=cfg["BM"], BN=cfg["BN"], **{k: v for k, v in deeper.items() if k not in ("BM", "BN")})
            vs["regs_wd4_deeper"] = deeper
        except ValueError:
            pass
        fns, outs = fp8_ab.launch_all(sets, vs)
        same = {n: torch.equal(outs["launched"], o) for n, o in outs.items()}
        ms = ht.timed({n: f for n, f in fns.items() if same.get(n, True)}, rounds=11)
        print("launched", cfg, flush=True)
        _report(M, N, K, ms, same, "scaled_mm_rowwise")


if __name__ == "__main__":
    for part in (sys.argv[1] if len(sys.argv) > 1 else "bf16,fp8").split(","):
        {"bf16": bf16, "fp8": fp8_gemm}[part]()
