"""The leaner mainloops (session 14: one descriptor per wgmma burst plus offsets, the warpgroup index made
warp-uniform, fp8 scale rows taken once per tile) against the sources rendered before the change
(bench/ab_before_*.json, written on the CPU from the previous commit's templates). One device call:

    PYTHONPATH=.:bench python3 bench/mainloop_ab.py

Each pair is checked for equal output (same arithmetic: bitwise), then timed interleaved
(hopper_gemm_tiles.timed); TFLOP/s.
"""
import json

import torch

from tiles.backends.hopper import gemm_probe, lower_fp8
from tiles.bench import fp8

import hopper_gemm_tiles as ht

FP8 = {"bn128": {}, "bn128_sk": dict(stream_k=True), "bn256_pp": dict(BN=256, stages=4, schedule="pingpong"),
       "bn256_pp_sk": dict(BN=256, stages=4, schedule="pingpong", stream_k=True)}
SHAPES = [(1024, 1536, 7168), (1024, 4608, 7168), (6144, 7168, 2304), (6144, 1536, 7168), (8192, 8192, 8192)]


def main():
    before = json.load(open("bench/ab_before_fp8.json"))
    for M, N, K in SHAPES:
        sets = [fp8.make_set(M, N, K, torch.device("cuda"), seed) for seed in range(2)]
        fns, same = {}, {}
        for name, cfg in FP8.items():
            outs = {}
            for tag, kern in (("before", before[name]), ("after", lower_fp8.fp8_source("bf16", **cfg))):
                gos = []
                for x in sets:
                    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
                    sb = x["sb"].unsqueeze(1).expand(x["sb"].shape[0], 128, x["sb"].shape[1])
                    gos.append(lower_fp8.bind(kern, x["a"], x["b"], x["sa"], sb, out))
                    if x is sets[0]:
                        gos[-1]()
                        outs[tag] = out
                fns[f"{name}_{tag}"] = lambda i, gos=gos: gos[i % 2]()
            torch.cuda.synchronize()
            same[name] = torch.equal(outs["before"], outs["after"]) and not torch.isnan(outs["after"]).any().item()
        ms = ht.timed(fns, rounds=11)
        print(M, N, K, "bitwise", same, flush=True)
        print("   ", " ".join(f"{n}={2 * M * N * K / (t * 1e-3) / 1e12:.0f}" for n, t in ms.items()), flush=True)
    old = json.load(open("bench/ab_before_gemm.json"))
    old_k = gemm_probe.GemmKernel(source=old["source"], name=old["name"], cfg=old["cfg"], smem_bytes=old["smem_bytes"],
                                  threads=old["threads"])
    for M, N, K in [(4096, 4096, 4096), (8192, 8192, 8192)]:
        sets = [(torch.randn(M, K, device="cuda").bfloat16(), torch.randn(K, N, device="cuda").bfloat16()) for _ in range(3)]
        fns, outs = {}, {}
        for tag, kern in (("before", old_k), ("after", gemm_probe.gemm_source("bf16", "bf16"))):
            launches = []
            for a, b in sets:
                out = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
                k, args, grid, keep = gemm_probe.bind(kern, a, b, out)
                launches.append((k, args, grid, kern, keep, out))
            k, args, grid, kern_, keep, out = launches[0]
            k.launch((grid,), (kern_.threads,), args, smem=kern_.smem_bytes)
            outs[tag] = out
            fns[tag] = lambda i, L=launches: L[i % 3][0].launch((L[i % 3][2],), (L[i % 3][3].threads,), L[i % 3][1],
                                                                 smem=L[i % 3][3].smem_bytes)
        fns["cublas"] = lambda i: torch.matmul(*sets[i % 3])
        torch.cuda.synchronize()
        ms = ht.timed(fns, rounds=11)
        print("bf16", M, N, K, "bitwise", torch.equal(outs["before"], outs["after"]),
              " ".join(f"{n}={2 * M * N * K / (t * 1e-3) / 1e12:.0f}" for n, t in ms.items()), flush=True)


if __name__ == "__main__":
    main()
