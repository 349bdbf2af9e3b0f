"""Session 15: the fp8 GEMM's launched configuration against the candidates, at the issue's five shapes.

    PYTHONPATH=.:bench python3 bench/fp8_bm192_ab.py

* `launched`: what tiles.gemm_fp8 runs (lower_fp8.choose; with BN 256 the turns), clamped scale loads
  (the default since session 15).
* `checked`: the same with `clamp_scales=False` (predicated scale loads, the default before).
* `session14`: session 14's choice (BN 128, or 256 with turns; stream-K where it picked it), clamped.
* `bm192`, `bm192_sk`: three consumer warpgroups of 64 rows (BM = 192) over 128-wide tiles, one
  scratch (acc + part fit 160 registers; 3 warpgroups keep the tensor core fed while one promotes),
  4 stages; without and with stream-K.

Each variant's output is compared bitwise with `launched` (equal wherever both sum each element in the
same order: stream-K's splits change the order of one addition), then all are timed interleaved
(hopper_gemm_tiles.timed) next to torch._scaled_mm row-wise; TFLOP/s.
"""
import torch

from tiles.backends.hopper import lower_fp8
from tiles.bench import fp8

import hopper_gemm_tiles as ht

SHAPES = [(1024, 1536, 7168), (1024, 4608, 7168), (6144, 7168, 2304), (6144, 1536, 7168), (8192, 8192, 8192)]
BM192 = dict(BM=192, stages=4)
SESSION14 = {(1024, 1536, 7168): dict(BN=128), (1024, 4608, 7168): dict(BN=128, stream_k=True)}
PP_SK = dict(BN=256, stages=4, schedule="pingpong", stream_k=True)


def variants(M, N, K, sms):
    cfg = lower_fp8.choose(M, N, K, sms)
    if cfg["BN"] == 256:
        cfg.update(stages=4, schedule="pingpong")
    return {"launched": cfg, "checked": dict(cfg, clamp_scales=False), "session14": SESSION14.get((M, N, K), PP_SK),
            "bm192": dict(BM192), "bm192_sk": dict(BM192, stream_k=True)}


def main():
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for M, N, K in SHAPES:
        sets = [fp8.make_set(M, N, K, torch.device("cuda"), seed) for seed in range(2)]
        fns, outs = {}, {}
        for label, cfg in variants(M, N, K, sms).items():
            gos = [lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], **cfg) for x in sets]
            gos[0][1].fill_(float("nan"))
            gos[0][0]()
            outs[label] = gos[0][1].clone()
            fns[label] = lambda i, gos=gos: gos[i % 2][0]()
        fns["scaled_mm_rowwise"] = lambda i: torch._scaled_mm(sets[i % 2]["a"], sets[i % 2]["b"].t(),
                                                              scale_a=sets[i % 2]["sa_row"], scale_b=sets[i % 2]["sb_row"],
                                                              out_dtype=torch.bfloat16)
        torch.cuda.synchronize()
        same = {label: torch.equal(outs["launched"], o) for label, o in outs.items()}
        ms = ht.timed(fns, rounds=11)
        print(M, N, K, "launched", variants(M, N, K, sms)["launched"], "bitwise", same, flush=True)
        print("   ", " ".join(f"{n}={2 * M * N * K / (t * 1e-3) / 1e12:.0f}" for n, t in ms.items()), flush=True)


if __name__ == "__main__":
    main()
