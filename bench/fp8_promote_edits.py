"""Session 26: where the fp8 GEMM's promotion loses to row-wise `_scaled_mm`, as three bounds and two
kernels beside the launched one, at the issue's five shapes.

    PYTHONPATH=.:bench python3 bench/fp8_promote_edits.py [--suite] [check]

Kernels (each must equal the launched output bit for bit: they reorder loads or independent FFMAs):
* `ahead2`: option scale_ahead=2, each block's scales read two K blocks before its promotion (one in
  the launched form; session 19 found the copy of the next block's scales waiting on a long scoreboard
  before the warpgroup's turn);
* `reorder`: the promotion's FFMAs of one row scale first, then the other's, so that consecutive
  FFMAs read the same scale register (ptxas can mark it for reuse on every one, not every second);
* `both`: the two together.
Bounds (not the answer; one statement of the rendered source changed):
* `fadd`: acc = part + acc (session 19's: the two-level sum row-wise `_scaled_mm` runs, no scales);
* `imm`: acc = fmaf(part, 0.75f, acc): FFMAs as launched, the scale an immediate (two register reads
  an FFMA, not three; the scales' loads vanish as unused);
* `l1`: the launched kernel with every K block's scales read from block 0's addresses (the loads stay,
  each hits in L1: what the loads' L2 latency costs).
`ring` (second call): the scales through a ring in shared memory that each consumer warp fills with its own
cp.async copies (option scale_ring: 4 or 8 K blocks), beside `l1` and `imm`; where the launcher takes
128 x 256 tiles (whose TMA epilogue leaves no room for the ring but at 3 stages), also the ring with
stores from registers at 4 stages, and 192 x 128 tiles (three consumer warpgroups) with and without it.
`check` renders and compiles everything on the CPU (no timing): `check` or `check ring`.
"""
import re
import sys

import torch

from tiles.backends.hopper import lower_fp8, runtime

import fp8_bounds

PROMOTE_LOOP = "for (int p = 0; p < part.pairs; ++p) {"
# pairs 0, 2, 4, ... (row scale s0) first, then 1, 3, 5, ... (s1); unrolled, so p is a constant either way
REORDERED = ("for (int q = 0; q < part.pairs; ++q) {\n"
             "    const int p = q < part.pairs / 2 ? 2 * q : 2 * (q - part.pairs / 2) + 1;")
SCALE_AT = re.compile(r"\[kb \* s([ab])_k\]")


def edit(kern: dict, how: str) -> dict:
    src = kern["source"]
    if how == "reorder":
        n = src.count(PROMOTE_LOOP)
        src = src.replace(PROMOTE_LOOP, REORDERED)
    elif how == "imm":
        src, n = fp8_bounds.FMA.subn(r"= fmaf(\1, 0.75f, \2);", src)
    elif how == "l1":
        src, n = SCALE_AT.subn("[0]", src)
    else:
        src, n = fp8_bounds.FMA.subn(r"= \1 + \2;", src)
    if n == 0:
        raise RuntimeError(f"{how}: nothing to edit in {kern['name']}")
    return dict(kern, source=src)


def variants(cfg: dict) -> dict:
    base = lower_fp8.fp8_source(torch.bfloat16, **cfg)
    ahead = lower_fp8.fp8_source(torch.bfloat16, **dict(cfg, scale_ahead=2))
    return {"launched": cfg, "ahead2": dict(cfg, scale_ahead=2), "reorder": edit(base, "reorder"),
            "both": edit(ahead, "reorder"), "fadd": edit(base, "fadd"), "imm": edit(base, "imm"),
            "l1": edit(base, "l1")}


def ring_variants(cfg: dict) -> dict:
    base = lower_fp8.fp8_source(torch.bfloat16, **cfg)
    out = {"launched": cfg, "ring4": dict(cfg, scale_ring=4), "ring8": dict(cfg, scale_ring=8),
           "l1": edit(base, "l1"), "imm": edit(base, "imm")}
    if cfg["BN"] == 256:
        bm192 = dict(BM=192, BN=128, stream_k=cfg["stream_k"], epilogue="regs", wide_stores=4, scale_index32=True)
        out.update(ring4_regs=dict(cfg, scale_ring=4, epilogue="regs", wide_stores=4, stages=4), bm192=bm192,
                   bm192_ring4=dict(bm192, scale_ring=4), bm192_ring4_whole=dict(bm192, scale_ring=4, stream_k=False))
    return out


EXACT = ("ahead2", "reorder", "both", "ring4", "ring8", "ring4_regs")
SETS = {"edits": variants, "ring": ring_variants}


def check(which="edits"):
    import fp8_ab
    for shape in fp8_ab.SHAPES:
        for label, v in SETS[which](fp8_ab.launched(*shape, 132)).items():
            kern = v if "source" in v else lower_fp8.fp8_source(torch.bfloat16, **v)
            log = runtime.compile_cuda(kern["source"], name=kern["name"] + f"_{label}.cu").log
            warn = [ln for ln in log.splitlines() if "warning" in ln.lower() or "spill" in ln.lower()]
            print(shape, label, kern["name"], warn, flush=True)


def main(which: str, suite: bool):
    import fp8_ab
    import hopper_gemm_tiles as ht
    from tiles.bench import fp8
    from tiles.bench import run as bench_run
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for M, N, K in fp8_ab.SHAPES:
        n_sets = bench_run._n_sets(M * K + N * K + 2 * M * N, torch.device("cuda")) if suite else 2
        sets = [fp8.make_set(M, N, K, torch.device("cuda"), seed) for seed in range(n_sets)]
        vs = SETS[which](fp8_ab.launched(M, N, K, sms))
        fns, outs = fp8_ab.launch_all(sets, vs)
        errs = {label: fp8.error_and_bound(o, sets[0]) for label, o in outs.items()}
        bad = {label: e for label, e in errs.items() if not e[0] <= e[1] and label not in ("fadd", "imm", "l1")}
        err, lim = errs["launched"]
        same = {label: torch.equal(outs[label], outs["launched"]) for label in EXACT if label in outs}
        ms = ht.suite_timed(fns, len(sets)) if suite else ht.timed(fns, rounds=11)
        print(M, N, K, vs["launched"], f"error {err:.3g} (bound {lim:.3g})", "bitwise", same,
              "over the bound:", bad, flush=True)
        print("   ", " ".join(f"{n}={2 * M * N * K / (t * 1e-3) / 1e12:.0f}({ms['launched'] / t:.3f})"
                            for n, t in ms.items()), flush=True)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a not in ("check", "--suite")]
    which = args[0] if args else "edits"
    if "check" in sys.argv[1:]:
        check(which)
    else:
        main(which, "--suite" in sys.argv[1:])
