"""Session 15: the launched fp8 configuration against a few knobs on top of it, at the issue's five
shapes: 2-CTA clusters sharing B by multicast (without stream-K, which takes single CTAs), a wider
grouped order, and a shallower ring.

    PYTHONPATH=.:bench python3 bench/fp8_knobs_ab.py

Outputs are compared bitwise with the launched kernel's where both sum in the same order (no split
along K on either side); then all are timed interleaved (hopper_gemm_tiles.timed); TFLOP/s.
"""
import torch

from tiles.backends.hopper import lower_fp8
from tiles.bench import fp8

import hopper_gemm_tiles as ht

SHAPES = [(1024, 1536, 7168), (1024, 4608, 7168), (6144, 7168, 2304), (6144, 1536, 7168), (8192, 8192, 8192)]


def variants(M, N, K, sms):
    cfg = lower_fp8.choose(M, N, K, sms)
    if cfg["BN"] == 256:
        cfg.update(schedule="pingpong")
    whole = dict(cfg, stream_k=False)
    out = {"launched": cfg, "cluster2": dict(whole, cluster=2), "group16": dict(cfg, group_m=16),
           "group4": dict(cfg, group_m=4)}
    if cfg["stream_k"]:
        out["whole"] = whole
    return out


def main():
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for M, N, K in SHAPES:
        sets = [fp8.make_set(M, N, K, torch.device("cuda"), seed) for seed in range(2)]
        fns, outs, vs = {}, {}, variants(M, N, K, sms)
        for label, cfg in vs.items():
            try:
                gos = [lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], **cfg) for x in sets]
            except ValueError as e:
                print(M, N, K, label, "refused:", e)
                continue
            gos[0][1].fill_(float("nan"))
            gos[0][0]()
            outs[label] = gos[0][1].clone()
            fns[label] = lambda i, gos=gos: gos[i % 2][0]()
        fns["scaled_mm_rowwise"] = lambda i: torch._scaled_mm(sets[i % 2]["a"], sets[i % 2]["b"].t(),
                                                              scale_a=sets[i % 2]["sa_row"], scale_b=sets[i % 2]["sb_row"],
                                                              out_dtype=torch.bfloat16)
        torch.cuda.synchronize()
        base = "whole" if "whole" in outs else "launched"
        same = {label: torch.equal(outs[base], o) for label, o in outs.items() if not vs[label]["stream_k"]}
        ms = ht.timed(fns, rounds=11)
        print(M, N, K, "launched", vs["launched"], "bitwise vs", base, same, flush=True)
        print("   ", " ".join(f"{n}={2 * M * N * K / (t * 1e-3) / 1e12:.0f}" for n, t in ms.items()), flush=True)


if __name__ == "__main__":
    main()
