"""One device call for the block-scaled fp8 GEMM on the H200: correctness over shapes and layouts,
the bad-input errors, configuration variants, then the benchmark harness (kernel gemm_fp8).

    PYTHONPATH=. TILES_CACHE_DIR=/tmp/tiles-cache python3 bench/hopper_gemm_fp8_check.py   # writes under $OUT
"""
import json
import os
import sys
import time

import torch

os.environ.setdefault("TILES_POISON", "1")  # unwritten output elements show up as NaN
import tiles  # noqa: E402
from tiles.bench import fp8  # noqa: E402
from tiles.backends.hopper import lower_fp8  # noqa: E402

OUT = os.environ.get("OUT", "/tmp/out")
os.makedirs(OUT, exist_ok=True)
dev = torch.device("cuda")
log = []


def say(*a):
    line = " ".join(str(x) for x in a)
    print(line, flush=True)
    log.append(line)


def fl(ref):
    return 2 * ((ref + 0.3 - 0.3) - ref).abs().max().item()


def check(M, N, K, layout, seed):
    x = fp8.make_set(M, N, K, dev, seed)
    if layout == "kmajor":
        args = (x["a"], x["b"], x["sa"], x["sb"])
    elif layout == "transposed":  # the challenge's storage: A K x M, B K x N, scales K-block-major
        args = (x["a_km"].t(), x["b_kn"].t(), x["sa_km"].t(), x["sb_kn"].t())
    else:  # mixed: A K-major, B transposed storage, scales transposed for A only
        args = (x["a"], x["b_kn"].t(), x["sa_km"].t(), x["sb"])
    c = tiles.gemm_fp8(*args)
    c2 = tiles.gemm_fp8(*args)
    torch.cuda.synchronize()
    ref = fp8.reference(x)
    lp = torch.matmul(x["a_bf"], x["b_bf"].t()).double()
    e = (c.double() - ref).abs().max().item() if not torch.isnan(c).any() else float("inf")
    elp = (lp - ref).abs().max().item()
    bound = 2 * elp + fl(ref) + 1e-9
    ok = e <= bound and torch.equal(c, c2)
    rel = ((c.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    say(f"{'ok  ' if ok else 'FAIL'} M={M} N={N} K={K} {layout:10} err={e:.3e} bound={bound:.3e} lp_err={elp:.3e} "
        f"rel_fro={rel:.2e} bitwise_repeat={torch.equal(c, c2)}")
    return ok


t0 = time.time()
say(torch.cuda.get_device_name(), torch.__version__, torch.version.cuda)
fails = 0
cases = [(1, 1, 1), (1, 1, 16), (7, 130, 200), (130, 200, 384), (257, 300, 1000), (64, 128, 128), (300, 129, 4096),
         (512, 384, 7168), (1024, 1536, 7168),
         # enough tiles for BN=256 with ping-pong (lower_fp8.choose); an odd N takes the register epilogue
         (6144, 7168, 2304), (6144, 7167, 1000)]
for i, (M, N, K) in enumerate(cases):
    for layout in ("kmajor", "transposed", "mixed"):
        try:
            fails += not check(M, N, K, layout, 100 + i)
        except Exception as e:  # noqa: BLE001
            fails += 1
            say(f"FAIL M={M} N={N} K={K} {layout}: {type(e).__name__}: {e}")
# bad input: the other vendor's format and a wrong dtype raise before any launch
x = fp8.make_set(128, 128, 256, dev, 7)
for what, args in (("fnuz", (x["a"].float().to(torch.float8_e4m3fnuz), x["b"].float().to(torch.float8_e4m3fnuz))),
                   ("e5m2", (x["a"].to(torch.float8_e5m2), x["b"].to(torch.float8_e5m2)))):
    try:
        tiles.gemm_fp8(*args, x["sa"], x["sb"])
        say(f"FAIL {what}: no error")
        fails += 1
    except (TypeError, ValueError) as e:
        say(f"ok   {what} -> {type(e).__name__}: {e}")
say(f"correctness: {fails} failures ({time.time() - t0:.0f}s)")

# configuration variants at two shapes (median of event-timed launches, inputs rotated)
def time_go(go, reps=30):
    for _ in range(3):
        go()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        torch.cuda._sleep(1_000_000)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        go()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    return sorted(ts)[len(ts) // 2]


variants = [dict(), dict(overlap=False), dict(stages=4), dict(group_m=16)]
var_rows = []
for (M, N, K) in ((1024, 1536, 7168), (6144, 7168, 2304), (8192, 8192, 8192)):
    x = fp8.make_set(M, N, K, dev, 11)
    ref = None
    for v in variants:
        try:
            go, out = lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], **v)
            ms = time_go(go)
            if ref is None:
                ref = fp8.reference(x)
            err = (out.double() - ref).abs().max().item()
            tf = 2 * M * N * K / ms / 1e9
            var_rows.append(dict(M=M, N=N, K=K, cfg=v, ms=ms, tflops=tf, max_err=err))
            say(f"variant M={M} N={N} K={K} {v}: {ms:.3f} ms {tf:.0f} TFLOP/s err {err:.2e}")
        except Exception as e:  # noqa: BLE001
            say(f"variant {v} failed: {type(e).__name__}: {e}")
    del x
    torch.cuda.empty_cache()
json.dump(var_rows, open(os.path.join(OUT, "fp8_variants.json"), "w"), indent=1)
open(os.path.join(OUT, "fp8_check.txt"), "w").write("\n".join(log) + "\n")
say(f"variants done ({time.time() - t0:.0f}s)")
if fails:
    sys.exit(1)
