"""Session 19: what the fp8 GEMM's per-block promotion costs, as two speed bounds beside the launched kernel.

    PYTHONPATH=.:bench python3 bench/fp8_bounds.py [--power]

The launched kernel folds each K block's product into the f32 sum with one FFMA an element,
acc = fmaf(part, sa[row] * sb, acc). Two bounds change only that statement in the rendered source:
* `fadd`: acc = part + acc, the scales unused: the two-level accumulation row-wise `_scaled_mm` runs
  (its scales come once, in the epilogue);
* `none`: only the first pair of each product added (two FADDs a block: ptxas drops a wgmma whose
  results nothing reads): the wgmmas, the ring and the epilogue with no promotion between them.
Neither computes the right answer (they are bounds, not kernels); everything else is the launched
kernel's, instruction for instruction. Where the launcher takes 128 x 256 tiles, the same three run
on 128 x 128 tiles too (`bn128`: the tile and the two scratch accumulators of the row-wise kernel's
shape). All are timed interleaved next to row-wise `_scaled_mm` (hopper_gemm_tiles.timed).
`--power`: at 8192^3, each of launched / fadd / none / `_scaled_mm` back to back for 2 s while
nvidia-smi samples the SM clock and the board power every 50 ms (medians of the last 1.5 s).
"""
import re
import statistics
import subprocess
import sys
import time

import torch

from tiles.backends.hopper import lower_fp8
from tiles.bench import fp8

import fp8_ab

FMA = re.compile(r"= fmaf\((part\.v\[0\]\[p\]\.[xy]), \w+, (acc\.v\[0\]\[[^\]]+\]\.[xy])\);")
BN128 = dict(BM=128, BN=128, stream_k=False, epilogue="regs", wide_stores=4, scale_index32=True)


def bound(cfg: dict, how: str) -> dict:
    """fp8_source's dict for cfg with the promotion's FFMAs made FADDs (`fadd`) or removed (`none`)."""
    kern = lower_fp8.fp8_source(torch.bfloat16, **cfg)
    src, n = FMA.subn(r"= \1 + \2;" if how == "fadd" else r"= p == 0 ? \1 + \2 : \2;", kern["source"])
    if n == 0:
        raise RuntimeError("the promotion's fmaf statements were not found in the rendered source")
    return dict(kern, source=src, name=kern["name"])


def variants(M, N, K, sms):
    cfg = fp8_ab.global_loads(M, N, K, sms)
    out = {"launched": cfg, "fadd": bound(cfg, "fadd"), "none": bound(cfg, "none")}
    if cfg["BN"] == 256:
        out.update(bn128=BN128, bn128_fadd=bound(BN128, "fadd"), bn128_none=bound(BN128, "none"))
    return out


def power(fns, seconds=2.0):
    """Median SM clock (MHz) and board power (W) while each fn runs back to back."""
    res = {}
    for name, fn in fns.items():
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                                "-lms", "50"], stdout=subprocess.PIPE, text=True)
        t0, i = time.time(), 0
        while time.time() - t0 < seconds:
            for _ in range(10):
                fn(i)
                i += 1
            torch.cuda.synchronize()
        smi.terminate()
        rows = [r.split(",") for r in smi.communicate()[0].strip().splitlines() if "," in r]
        rows = rows[len(rows) // 4:]
        res[name] = (statistics.median(float(r[0]) for r in rows), statistics.median(float(r[1]) for r in rows))
        time.sleep(1.0)
    return res


def main(with_power):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for M, N, K in fp8_ab.SHAPES:
        sets = fp8_ab.input_sets(M, N, K)
        vs = variants(M, N, K, sms)
        fns, outs = fp8_ab.launch_all(sets, vs)
        err, lim = fp8.error_and_bound(outs["launched"], sets[0])
        ms = fp8_ab.timings(fns, len(sets))
        print(M, N, K, "launched", vs["launched"], f"error {err:.3g} (bound {lim:.3g})", flush=True)
        fp8_ab.print_speeds(M, N, K, ms)
        if with_power and (M, N, K) == (8192, 8192, 8192):
            keep = ("launched", "fadd", "none", "scaled_mm_rowwise")
            for n, (mhz, w) in power({n: fns[n] for n in keep}).items():
                print(f"    power {n}: {mhz:.0f} MHz, {w:.0f} W", flush=True)


if __name__ == "__main__":
    main("--power" in sys.argv[1:])
