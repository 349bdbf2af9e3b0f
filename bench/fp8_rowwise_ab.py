"""Session 34: the row-wise fp8 GEMM's (gemm_fp8_rowwise, option rowwise) launched configuration against
candidates at the issue's five shapes, each checked against the float64 bound, then timed beside
row-wise torch._scaled_mm (back to back and in the suite's timing; TFLOP/s, speed over launched).

    PYTHONPATH=.:bench python3 bench/fp8_rowwise_ab.py [clusters]

Candidates (variants()): the block-scaled kernel's tile choice, 192 x 128 tiles with and without stream-K,
128 x 96 tiles, and with 128-wide tiles the other epilogue. The scales multiply each 64-column chunk as
the TMA epilogue stores it, so with the deferred store (128 x 256 tiles) they run under the next tile's
first burst.
"""
import sys

import torch

import hopper_gemm_tiles as ht
from tiles.backends.hopper import lower_fp8
from tiles.bench import fp8
from tiles.bench import run as bench_run

SHAPES = fp8.SHAPES


def variants(M, N, K, sms):
    """The launched options against the block-scaled kernel's choice of tile (`block_choice`, where it
    differs), 192 x 128 tiles with and without stream-K, 128 x 96 tiles, and the other store."""
    base = lower_fp8.launch_options(M, N, K, sms, rowwise=True)
    out = {"launched": base}
    block = lower_fp8.launch_options(M, N, K, sms)
    if lower_fp8.defer_store_pays(block, K, rowwise=True):
        block["defer_store"] = True
    if block != base:
        out["block_choice"] = block
    for label, cfg in (("bm192_sk", dict(BM=192, BN=128, stream_k=True)), ("bm192", dict(BM=192, BN=128)),
                       ("bn96", dict(BM=128, BN=96, stream_k=False, epilogue="regs", wide_stores=4))):
        if cfg != base:
            out[label] = cfg
    if base.get("BN") == 128:
        out["other_store"] = {k: v for k, v in base.items() if k not in ("epilogue", "wide_stores")} \
            if base.get("epilogue") == "regs" else dict(base, epilogue="regs", wide_stores=4)
    return out


def cluster_variants(M, N, K, sms):
    """Session 35: the launched tile in 2-CTA clusters sharing B by multicast, and the other tiles in clusters
    (128 x 128 and 192 x 128 split by stream-K over the clusters, 128 x 96 whole)."""
    base = lower_fp8.launch_options(M, N, K, sms, rowwise=True)
    out = {"launched": base, "cl2": dict(base, cluster=2)}
    for label, cfg in (("bn128_sk_cl2", dict(BM=128, BN=128, stream_k=True)), ("bm192_sk_cl2", dict(BM=192, BN=128, stream_k=True)),
                       ("bn96_cl2", dict(BM=128, BN=96, stream_k=False, epilogue="regs", wide_stores=4))):
        if {k: base.get(k) for k in cfg} != cfg:
            out[label] = dict(cfg, cluster=2)
    return out


def main(which=variants):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for shape in SHAPES:
        M, N, K = shape["M"], shape["N"], shape["K"]
        n_sets = bench_run._n_sets(M * K + N * K + 2 * M * N, torch.device("cuda"))
        sets = [fp8.make_set(M, N, K, torch.device("cuda"), 40 + s) for s in range(n_sets)]
        fns, bad = {}, []
        for label, cfg in which(M, N, K, sms).items():
            gos = [lower_fp8.launcher(x["a"], x["b"], x["sa_row"], x["sb_row"], rowwise=True, **cfg) for x in sets]
            gos[0][1].fill_(float("nan"))
            gos[0][0]()
            torch.cuda.synchronize()
            err, bound = fp8.error_and_bound_rowwise(gos[0][1], sets[0])
            if not err <= bound:
                bad.append(f"{label} ({err:.3g} > {bound:.3g})")
                continue
            fns[label] = lambda i, gos=gos: gos[i % len(gos)][0]()
        fns["scaled_mm_rowwise"] = lambda i: torch._scaled_mm(
            sets[i % n_sets]["a"], sets[i % n_sets]["b"].t(), scale_a=sets[i % n_sets]["sa_row"],
            scale_b=sets[i % n_sets]["sb_row"], out_dtype=torch.bfloat16)
        print(f"{M} x {N} x {K}: launched {lower_fp8.launch_options(M, N, K, sms, rowwise=True)}; outside the float64 bound: {bad or 'none'}",
              flush=True)
        for how, ms in (("back to back", ht.timed(fns, rounds=9)), ("suite timing", ht.suite_timed(fns, n_sets))):
            print(f"  {how}:", " ".join(f"{n}={2 * M * N * K / (t * 1e-3) / 1e12:.0f}({ms['launched'] / t:.3f})"
                                        for n, t in ms.items()), flush=True)


if __name__ == "__main__":
    main(cluster_variants if sys.argv[1:] == ["clusters"] else variants)
