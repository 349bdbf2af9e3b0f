"""Prepared in session 14, not yet run: the fp8 GEMM's `clamp_scales` option against the checked scale
loads, at the issue's five shapes with the launcher's width and split (lower_fp8.choose). One device call:

    PYTHONPATH=.:bench python3 bench/clamp_scales_ab.py

Each pair is checked bitwise equal first (rows past M and blocks past N are never stored), then timed
interleaved (hopper_gemm_tiles.timed) next to torch._scaled_mm row-wise; TFLOP/s. On the CPU the option
takes 13-14% of the mainloop's instructions away (bench/hopper_fp8_notes.md, "Prepared").
"""
import torch

from tiles.backends.hopper import lower_fp8
from tiles.bench import fp8

import hopper_gemm_tiles as ht

SHAPES = [(1024, 1536, 7168), (1024, 4608, 7168), (6144, 7168, 2304), (6144, 1536, 7168), (8192, 8192, 8192)]


def main():
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for M, N, K in SHAPES:
        cfg = lower_fp8.choose(M, N, K, sms)
        if cfg["BN"] == 256:
            cfg.update(stages=4, schedule="pingpong")
        sets = [fp8.make_set(M, N, K, torch.device("cuda"), seed) for seed in range(2)]
        fns, outs = {}, {}
        for clamp in (False, True):
            gos = [lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], clamp_scales=clamp, **cfg) for x in sets]
            gos[0][0]()
            outs[clamp] = gos[0][1]
            fns["clamped" if clamp else "checked"] = lambda i, gos=gos: gos[i % 2][0]()
        fns["scaled_mm_rowwise"] = lambda i: torch._scaled_mm(sets[i % 2]["a"], sets[i % 2]["b"].t(),
                                                              scale_a=sets[i % 2]["sa_row"], scale_b=sets[i % 2]["sb_row"],
                                                              out_dtype=torch.bfloat16)
        torch.cuda.synchronize()
        same = torch.equal(outs[False], outs[True])
        ms = ht.timed(fns, rounds=11)
        print(M, N, K, cfg, "bitwise", same,
              " ".join(f"{n}={2 * M * N * K / (t * 1e-3) / 1e12:.0f}" for n, t in ms.items()), flush=True)


if __name__ == "__main__":
    main()
