"""Is the stream-K fp8 kernel slower per whole tile than the plain one? One device call:

    PYTHONPATH=.:bench python3 bench/stream_k_ab.py

Per shape and tile width: the plain kernel, the stream-K kernel with nothing split (lower_fp8.split_tiles
forced to 0: the same whole tiles in the same order, only the kernel's code differs), and stream-K as the
launcher splits. TFLOP/s from interleaved event-timed launches (hopper_gemm_tiles.timed).
"""
import torch

from tiles.backends.hopper import lower_fp8
from tiles.bench import fp8

import hopper_gemm_tiles as ht

SHAPES = [(6144, 7168, 2304), (1024, 4608, 7168), (1024, 1536, 7168), (6144, 1536, 7168), (8192, 8192, 8192)]
WIDTHS = {"bn128": {}, "bn256_pp": dict(BN=256, stages=4, schedule="pingpong")}


def main():
    split = lower_fp8.split_tiles
    for M, N, K in SHAPES:
        sets = [fp8.make_set(M, N, K, torch.device("cuda"), seed) for seed in range(2)]
        fns = {}
        for wname, cfg in WIDTHS.items():
            for name, sk, force0 in (("plain", False, False), ("sk_none_split", True, True), ("sk", True, False)):
                lower_fp8.split_tiles = (lambda *a: 0) if force0 else split
                gos = [lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], stream_k=sk, **cfg)[0] for x in sets]
                fns[f"{wname}_{name}"] = lambda i, gos=gos: gos[i % 2]()
        lower_fp8.split_tiles = split
        ms = ht.timed(fns, rounds=15)
        print(M, N, K, " ".join(f"{n}={2 * M * N * K / (t * 1e-3) / 1e12:.0f}" for n, t in ms.items()), flush=True)


if __name__ == "__main__":
    main()
