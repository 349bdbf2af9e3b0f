"""Block-scaled fp8 GEMM variants on the H200 (issue #9), one device call:

    sh bench/device_fp8_variants.sh        # smoke (each variant, small shapes, under a timeout), then the full run

--smoke: every variant on small shapes (odd tile counts, N and K tails) against the float64 dequantized
reference, output poisoned with NaN first; prints `OKVAR name` per variant that passes.
--only a,b,...: the full run for those variants: correctness at the small shapes and at the two
M=1024 issue shapes against float64, bitwise agreement with `base` at every issue shape (every variant
does the same fmaf sequence per element), then all variants and the baselines (torch._scaled_mm
row-wise, cuBLAS bf16) timed interleaved, rep by rep, on rotating input sets (median of event-timed
launches). Rows go to $OUT/fp8_variants.json; a table is printed last.
FP8_VARIANTS=a,b,...: keep only these variants (plus base and base_again) in both modes, e.g.
FP8_VARIANTS=bn256,bn256_pp for the ping-pong check (bench/hopper_fp8_notes.md, "Prepared, not yet measured").
"""
import json
import os
import sys
import time

import torch

from tiles.backends.hopper import lower_fp8
from tiles.bench import fp8

VARIANTS = {
    "base": dict(),  # the default until now: 128x128, overlap, 6 stages, group 8
    "base_again": dict(),  # the same kernel timed twice: the noise floor
    "bn256": dict(BN=256, stages=4),
    "cl2": dict(cluster=2),
    "bn256_cl2": dict(BN=256, stages=4, cluster=2),
    "cl2_g16": dict(cluster=2, group_m=16),
    # prepared 2026-11-29, not yet measured: BN=256 with the consumer warpgroups' wgmma bursts alternating
    "bn256_pp": dict(BN=256, stages=4, schedule="pingpong"),
    # session 13: 64-row tiles, one consumer warpgroup: twice the tiles for the M = 1024 shapes' waves
    "bm64": dict(BM=64, consumers=1),
    "bm64_s8": dict(BM=64, consumers=1, stages=8),
    # session 14: stream-K over the last waves (schedule.h), at each tile width
    "sk": dict(stream_k=True),
    "bn256_pp_sk": dict(BN=256, stages=4, schedule="pingpong", stream_k=True),
}
# grids smaller than the SM count for the stream-K variants' small-shape checks: tiles split into many
# shares (a head adding several partial sums, shares wholly inside one tile, empty shares)
SK_GRIDS = (4, 7, 13)
if os.environ.get("FP8_VARIANTS"):
    _keep = {"base", "base_again", *os.environ["FP8_VARIANTS"].split(",")}
    _unknown = _keep - set(VARIANTS)
    if _unknown:
        sys.exit(f"FP8_VARIANTS: unknown variants {sorted(_unknown)}; known: {sorted(VARIANTS)}")
    VARIANTS = {k: v for k, v in VARIANTS.items() if k in _keep}
SMALL = [(7, 130, 200), (130, 200, 384), (257, 300, 1000), (300, 129, 4096), (384, 640, 1024), (512, 384, 7168)]
OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
dev = torch.device("cuda")


def say(*a):
    print(" ".join(str(x) for x in a), flush=True)


def bound_of(x, ref):
    lp = torch.matmul(x["a_bf"], x["b_bf"].t()).double()
    fl = 2 * ((ref + 0.3 - 0.3) - ref).abs().max().item()
    return 2 * (lp - ref).abs().max().item() + fl + 1e-9


def run_variant(v, x, out=None, **extra):
    out = torch.full((x["a"].shape[0], x["b"].shape[0]), float("nan"), dtype=torch.bfloat16, device=dev)
    go, out = lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], out=out, **VARIANTS[v], **extra)
    go()
    torch.cuda.synchronize()
    return go, out


def check_small(v, seed0=100):
    ok = True
    for i, (M, N, K) in enumerate(SMALL):
        x = fp8.make_set(M, N, K, dev, seed0 + i)
        ref = fp8.reference(x)
        b = bound_of(x, ref)
        for grid in (None,) + (SK_GRIDS if VARIANTS[v].get("stream_k") else ()):
            go, c = run_variant(v, x, sms=grid)
            e = (c.double() - ref).abs().max().item() if not torch.isnan(c).any() else float("inf")
            again = c.clone()
            go()
            torch.cuda.synchronize()
            same = torch.equal(c, again)  # split tiles are summed in K order: the same bits every run
            ok &= e <= b and same
            if e > b or not same:
                say(f"FAIL {v} M={M} N={N} K={K} grid={grid} err={e:.3e} bound={b:.3e} repeatable={same}")
    return ok


def smoke():
    for v in VARIANTS:
        if v == "base_again":
            continue
        t = time.time()
        try:
            ok = check_small(v)
        except Exception as e:  # noqa: BLE001
            say(f"FAIL {v}: {type(e).__name__}: {e}")
            ok = False
        say(f"{'OKVAR' if ok else 'BADVAR'} {v} ({time.time() - t:.1f}s)")
    # the default path (lowering of the tile program) on the three storage layouts
    import tiles
    os.environ["TILES_POISON"] = "1"
    for i, (M, N, K) in enumerate([(257, 300, 1000), (1024, 1536, 7168)]):
        x = fp8.make_set(M, N, K, dev, 50 + i)
        ref = fp8.reference(x)
        for layout, args in (("kmajor", (x["a"], x["b"], x["sa"], x["sb"])),
                             ("transposed", (x["a_km"].t(), x["b_kn"].t(), x["sa_km"].t(), x["sb_kn"].t()))):
            c = tiles.gemm_fp8(*args)
            torch.cuda.synchronize()
            e = (c.double() - ref).abs().max().item() if not torch.isnan(c).any() else float("inf")
            say(f"{'ok  ' if e <= bound_of(x, ref) else 'FAIL'} default tiles.gemm_fp8 M={M} N={N} K={K} {layout} err={e:.3e}")


def timed(fn, reps_out):
    torch.cuda._sleep(500_000)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    reps_out.append(s.elapsed_time(e))


def full(only):
    rows, fails = [], 0
    for v in only:
        if v != "base_again" and not check_small(v, seed0=200):
            fails += 1
            say(f"FAIL small shapes {v}")
    for (M, N, K) in [tuple(s.values()) for s in fp8.SHAPES]:
        nbytes = 7 * (M * K + N * K) + 2 * M * N
        nsets = max(2, min(4, -(-3 * (50 << 20) // nbytes)))
        sets = [fp8.make_set(M, N, K, dev, 3000 + i) for i in range(nsets)]
        x0 = sets[0]
        ref = fp8.reference(x0) if M * N * K <= 1024 * 4608 * 7168 else None
        b = bound_of(x0, ref) if ref is not None else None
        gos, base_out, status = {}, None, {}
        for v in only:
            try:
                per = []
                for x in sets:
                    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device=dev)
                    go, out = lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], out=out, **VARIANTS[v])
                    per.append(go)
                    if x is x0:
                        go()
                        torch.cuda.synchronize()
                        if torch.isnan(out).any():
                            raise RuntimeError("unwritten (NaN) output")
                        if base_out is None:
                            base_out = out.clone()
                        same = torch.equal(out, base_out)
                        err = (out.double() - ref).abs().max().item() if ref is not None else None
                        good = same and (ref is None or err <= b)
                        if VARIANTS[v].get("stream_k"):
                            # split tiles add their shares' sums in another order than base: not the same
                            # bits, so within one bf16 step of base's largest value, and repeatable
                            first = out.clone()
                            go()
                            torch.cuda.synchronize()
                            near = (out.float() - base_out.float()).abs().max().item()
                            good = torch.equal(out, first) and near <= base_out.float().abs().max().item() * 2 ** -7 \
                                and (ref is None or err <= b)
                            status[v] = dict(bitwise_eq_base=same, max_diff_base=near)
                        status[v] = dict(status.get(v, {}), bitwise_eq_base=same, max_err=err, err_bound=b,
                                         correct=good)
                        if not good:
                            fails += 1
                            say(f"FAIL {v} M={M} N={N} K={K} {status[v]}")
                gos[v] = per
            except Exception as e:  # noqa: BLE001
                fails += 1
                say(f"FAIL {v} M={M} N={N} K={K}: {type(e).__name__}: {e}")
        base_fns = {
            "scaled_mm_rowwise": lambda x: torch._scaled_mm(x["a"], x["b"].t(), scale_a=x["sa_row"],
                                                            scale_b=x["sb_row"], out_dtype=torch.bfloat16),
            "cublas_bf16": lambda x: torch.matmul(x["a_bf"], x["b_bf"].t()),
        }
        impls = {v: [(lambda g=g: g()) for g in gos[v]] for v in gos if status.get(v, {}).get("correct")}
        for n, f in base_fns.items():
            impls[n] = [(lambda f=f, x=x: f(x)) for x in sets]
        for per in impls.values():  # warm-up
            for f in per:
                f()
        torch.cuda.synchronize()
        times = {n: [] for n in impls}
        for r in range(40):
            for n, per in impls.items():
                timed(per[r % len(per)], times[n])
        flop = 2 * M * N * K
        for n, ts in times.items():
            ts.sort()
            ms = ts[len(ts) // 2]
            row = dict(M=M, N=N, K=K, impl=n, cfg=VARIANTS.get(n), ms=ms, tflops=flop / ms / 1e9,
                       ms_p10=ts[len(ts) // 10], ms_p90=ts[9 * len(ts) // 10], **status.get(n, {}))
            rows.append(row)
        say(f"--- M={M} N={N} K={K} ({nsets} input sets)")
        for row in rows[-len(times):]:
            say(f"{row['impl']:18} {row['ms']:.4f} ms {row['tflops']:6.0f} TFLOP/s  {row.get('correct', '')}")
        json.dump(rows, open(os.path.join(OUT, "fp8_variants.json"), "w"), indent=1)
        del sets, x0, ref
        torch.cuda.empty_cache()
    say(f"full run: {fails} failures")
    # the summary table, last
    say("| M | N | K | " + " | ".join(times.keys()) + " |")
    shapes = sorted({(r["M"], r["N"], r["K"]) for r in rows}, key=lambda s: [tuple(x.values()) for x in fp8.SHAPES].index(s))
    for s in shapes:
        cells = {r["impl"]: r["tflops"] for r in rows if (r["M"], r["N"], r["K"]) == s}
        say(f"| {s[0]} | {s[1]} | {s[2]} | " + " | ".join(f"{cells.get(n, float('nan')):.0f}" for n in times) + " |")
    return fails


if __name__ == "__main__":
    say(torch.cuda.get_device_name(), torch.__version__, torch.version.cuda)
    if sys.argv[1:2] == ["--smoke"]:
        smoke()
    else:
        only = [v for v in sys.argv[2].split(",") if v] if sys.argv[1:2] == ["--only"] else list(VARIANTS)
        if "base" not in only:
            only.insert(0, "base")
        if "base_again" not in only:
            only.insert(1, "base_again")
        sys.exit(1 if full(only) else 0)
