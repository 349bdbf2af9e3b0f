"""Does the persistent GEMMs' last partial wave cost what the tile count says? One device call:

    PYTHONUNBUFFERED=1 PYTHONPATH=. python3 bench/wave_probe.py

Pairs of shapes that differ only in M: one whose tile count leaves the last wave of 132 SMs partly idle
(8192^3: 2048 tiles of 128 x 256 = 15.5 waves), one whose count is a whole number of waves (M = 8448:
2112 tiles = 16). If the idle tail costs what it should, TFLOP/s rise by 16 / 15.5 at the whole-wave
shape for tiles and stay flat for cuBLAS (if cuBLAS balances its tail). Same for the fp8 GEMM (launcher's
tile choice). TFLOP/s from interleaved event-timed launches (hopper_gemm_tiles.timed); no correctness
check here (the tiles paths are the tested ones).
"""
import torch

from tiles.backends.hopper import gemm_probe, lower_fp8
from tiles.bench import fp8

import hopper_gemm_tiles as ht

BF16 = [(8192, 8192, 8192), (8448, 8192, 8192), (4096, 4096, 4096), (4224, 4096, 4096),
        (8192, 8192, 2048), (8448, 8192, 2048)]
FP8 = [(1024, 1536, 7168), (1408, 1536, 7168), (1024, 4608, 7168), (1408, 4608, 7168),
       (6144, 7168, 2304), (5632, 7680, 2304), (8192, 8192, 8192), (8448, 8192, 8192)]


def main():
    for M, N, K in BF16:
        sets = [(torch.randn(M, K, device="cuda").bfloat16(), torch.randn(K, N, device="cuda").bfloat16())
                for _ in range(3)]
        gos = [gemm_probe.launcher(a, b)[0] for a, b in sets]
        ms = ht.timed({"tiles": lambda i: gos[i % 3](), "cublas": lambda i: torch.matmul(*sets[i % 3])})
        tf = {n: 2 * M * N * K / (t * 1e-3) / 1e12 for n, t in ms.items()}
        print("bf16", M, N, K, {n: round(v) for n, v in tf.items()}, flush=True)
    for M, N, K in FP8:
        sets = [fp8.make_set(M, N, K, torch.device("cuda"), seed) for seed in range(2)]
        bn = lower_fp8.choose(M, N, K, torch.cuda.get_device_properties(0).multi_processor_count)["BN"]
        extra = dict(BN=256, stages=4, schedule="pingpong") if bn == 256 else {}
        gos = [lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], **extra)[0] for x in sets]
        ms = ht.timed({"tiles": lambda i: gos[i % 2]()})
        print("fp8", M, N, K, "BN", bn, round(2 * M * N * K / (ms["tiles"] * 1e-3) / 1e12), flush=True)


if __name__ == "__main__":
    main()
