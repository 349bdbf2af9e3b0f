"""Session 37: the rescale form of the block-scaled fp8 GEMM (option `rescale`) against the launched
promotion, at the shapes that launch the 128 x 256 ping-pong kernel, beside row-wise `_scaled_mm`.

    PYTHONPATH=.:bench python3 bench/fp8_rescale_ab.py [--suite]    (at dbc82d9: the option was removed after it)

The launched kernel sums each K block into a scratch accumulator and folds it into the f32 sum with one
FFMA an element, acc = fmaf(part, sa[row] * sb, acc). The rescale form keeps acc in units of the
latest block's scales: each block multiplies acc by s_prev / s_cur (one FMUL an element) and its
wgmmas accumulate straight into acc; the tile's end multiplies by s_cur. Not bitwise the launched
output (the rounding differs): each variant is checked against float64 by the TESTING.md rule, on the
standard problem and on one whose A scales spread over 2^-20 .. 2^20 from block to block (`wide`).
Then all are timed interleaved, back to back (default) or as the standard suite times (--suite).
"""
import sys

import torch

from tiles.bench import fp8

import fp8_ab

SHAPES = [(6144, 7168, 2304), (8192, 8192, 8192)]


def wide_set(M, N, K, seed):
    """The standard problem with each A scale multiplied by 2^u, u uniform in [-20, 20]: the units change
    by up to 2^40 between blocks."""
    x = fp8.make_set(M, N, K, torch.device("cuda"), seed)
    g = torch.Generator(device="cuda").manual_seed(seed + 1000)
    x["sa"] = x["sa"] * torch.exp2(torch.randint(-20, 21, x["sa"].shape, device="cuda", generator=g).float())
    x["a_bf"] = fp8.dequantize(x["a"], x["sa"], 1).to(torch.bfloat16)
    return x


def main(suite: bool):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for M, N, K in SHAPES:
        cfg = fp8_ab.launched(M, N, K, sms)
        vs = {"launched": cfg, "rescale": dict(cfg, rescale=True)}
        for label, xs in (("wide", [wide_set(M, N, K, 7)]),):
            _, outs = fp8_ab.launch_all(xs, vs)
            print(M, N, K, label, {n: "%.3g / %.3g" % fp8.error_and_bound(o, xs[0]) for n, o in outs.items()},
                  flush=True)
        sets = fp8_ab.input_sets(M, N, K, suite)
        fns, outs = fp8_ab.launch_all(sets, vs)
        errs = {n: "%.3g / %.3g" % fp8.error_and_bound(o, sets[0]) for n, o in outs.items()}
        diff = (outs["rescale"].float() - outs["launched"].float()).abs().max().item()
        print(M, N, K, cfg, "error / bound", errs, "max |rescale - launched|", diff, flush=True)
        ms = fp8_ab.timings(fns, len(sets), suite)
        fp8_ab.print_speeds(M, N, K, ms)


if __name__ == "__main__":
    main("--suite" in sys.argv[1:])
