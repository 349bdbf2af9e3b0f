"""Session 26: where the fp8 GEMM's promotion loses to row-wise `_scaled_mm`, at the issue's five shapes:
four bounds, and the launched kernel with its scale loads moved or its FFMAs reordered, side by side.

    PYTHONPATH=.:bench python3 bench/fp8_promote_edits.py [edits|prefetch|table|layout] [--suite] [check]

Kernels (each must equal the launched output bit for bit: they reorder loads or independent FFMAs):
* `late` (set `edits`): each block's scales read after the previous block's were last used, into the
  same registers (`cur = scales.at(kb + 1)` after the promotion): no register copy waiting on a load,
  and no load before the wgmmas in the source;
* `reorder` (set `edits`): the promotion's FFMAs of one row scale first, then the other's, so that
  consecutive FFMAs read the same scale register (ptxas can mark it for reuse on every one);
Bounds (set `edits`; not the answer: one statement of the rendered source changed):
* `fadd`: acc = part + acc (session 19's, fp8_bounds.bound: the two-level sum row-wise `_scaled_mm`
  runs, no scales);
* `imm`: acc = fmaf(part, 0.75f, acc): FFMAs as launched, the scale an immediate (two register reads
  an FFMA, not three; the scales' loads vanish as unused);
* `l1`: every K block's scales read from block 0's addresses (read-only loads of one address: ptxas
  hoists them, and their products, out of the loop).
Measured and removed in the same session (options of the template then; bench/hopper_fp8_notes.md,
session 26): the scales two blocks ahead through register copies (2fe5c06) and in two alternating sets
(1097872), through a shared-memory ring that each consumer warp filled with cp.async (9f39d1a), and
through a consumer warpgroup's table of 8 or 16 blocks in two windows (dd19e87, and leaner at 504943e,
with its bitwise check at odd shapes: `python3 bench/fp8_promote_edits.py odd` there).
`prefetch`: `pf8` / `pf16`, each scale load also prefetching into L1 its row's line 8 / 16 K blocks on.
`table`: the `lds` bound (scales as shared loads from a table nothing fills) beside `l1`.
`layout`: the launched kernel on a_scale stored K-major (a warp's 8 rows' scales in one sector).
`check` renders and compiles a set on the CPU (no timing).
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
NEXT = re.compile(r"        const block_scales next = scales\.at\(min\(kb \+ 1, (.+?) - 1\)\);\n")


def prefetch(src: str, ahead: int) -> str:
    """Each scale load also prefetches into L1 the line its row's scales reach `ahead` K blocks later
    (clamped to the last block), so that the loads hit in L1 where now every line's first one misses;
    a prefetch writes no register, nothing waits for it (`pf8`, `pf16`)."""
    edits = [("  int sa_k, sb_k;\n", "  int sa_k, sb_k;\n  int klast;\n"),
             ("int M, int nblocks, int row0, int tn)", "int M, int nblocks, int row0, int tn, int klast_)"),
             ("sa_k(sa_k_), sb_k(sb_k_) {}", "sa_k(sa_k_), sb_k(sb_k_), klast(klast_) {}"),
             ("    block_scales s;\n    s.a0 = a0[kb * sa_k];",
              f"    block_scales s;\n    const int kp = ::min(kb + {ahead}, klast);\n"
              '    asm volatile("prefetch.global.L1 [%0];" ::"l"(a0 + kp * sa_k));\n'
              '    asm volatile("prefetch.global.L1 [%0];" ::"l"(a1 + kp * sa_k));\n'
              '    asm volatile("prefetch.global.L1 [%0];" ::"l"(b + kp * sb_k));\n    s.a0 = a0[kb * sa_k];'),
             ("M, nblocks, row0, tn);", "M, nblocks, row0, tn, kblocks - 1);")]
    for old, new in edits:  # the struct once; its construction once a loop (twice with stream-K)
        if src.count(old) != 1 and not (old.startswith("M, nblocks") and src.count(old) == 2):
            return ""
        src = src.replace(old, new)
    return src


def lds(src: str) -> str:
    """A bound: the scales read from a table in shared memory that nothing fills (garbage values), laid
    out by K block then row as a whole tile's table would be (a warp's rows in distinct banks): the
    loop's scale path as LDS only, no waits on L2 or on copies in flight (`lds`)."""
    old = ("    block_scales s;\n    s.a0 = a0[kb * sa_k];\n    s.a1 = a1[kb * sa_k];\n    s.b = b[kb * sb_k];\n"
           "    s.b1 = HALVES == 2 || BN == 96 ? b1[kb * sb_k] : 0.f;\n")
    new = ("    __shared__ float table[4096];\n    const int r = threadIdx.x & 127;\n    block_scales s;\n"
           "    s.a0 = table[(kb * 128 + r / 4) & 4095];\n    s.a1 = table[(kb * 128 + r / 4 + 8) & 4095];\n"
           "    s.b = table[(kb * 128 + 120) & 4095];\n    s.b1 = table[(kb * 128 + 121) & 4095];\n")
    return src.replace(old, new) if src.count(old) == 1 else ""


def late(src: str) -> str:
    """Each block's scales read after the last use of the previous block's, into the same variable: no
    copy of a load in flight, and no load before the wgmmas in the source (`late`)."""
    out, n = src, 0
    while (m := NEXT.search(out)) is not None:  # the loops without overlap: cur = next -> a load into cur
        rest = out[m.end():]
        at = rest.index("        cur = next;\n")
        out = out[:m.start()] + rest[:at] + f"        cur = scales.at(min(kb + 1, {m.group(1)} - 1));\n" \
            + rest[at + len("        cur = next;\n"):]
        n += 1
    # the overlapped loops: prev_s takes block kb's scales right after its own promotion
    for old, new in (("        block_scales cur = scales.at(kb);\n", ""), ("        cur = scales.at(kb + 1);\n", "")):
        n += out.count(old)
        out = out.replace(old, new)
    halves = out.split("        prev_s = cur;\n")
    out = halves[0] + "".join(("        prev_s = scales.at(kb);\n" if i % 2 == 0 else "        prev_s = scales.at(kb + 1);\n")
                              + h for i, h in enumerate(halves[1:]))
    return out if n else ""


def edit(kern: dict, how: str) -> dict:
    src = kern["source"]
    if how in ("late", "lds") or how.startswith("pf"):
        src = late(src) if how == "late" else lds(src) if how == "lds" else prefetch(src, int(how[2:]))
        n = int(bool(src))
    elif how == "reorder":
        n = src.count(PROMOTE_LOOP)
        src = src.replace(PROMOTE_LOOP, REORDERED)
    elif how == "imm":
        src, n = fp8_bounds.FMA.subn(r"= fmaf(\1, 0.75f, \2);", src)
    elif how == "l1":
        src, n = SCALE_AT.subn("[0]", src)
    else:
        raise ValueError(f"unknown edit {how!r}")
    if n == 0:
        raise RuntimeError(f"{how}: nothing to edit in {kern['name']}")
    return dict(kern, source=src)


def variants(cfg: dict) -> dict:
    base = lower_fp8.fp8_source(torch.bfloat16, **cfg)
    return {"launched": cfg, "late": edit(base, "late"), "reorder": edit(base, "reorder"),
            "fadd": fp8_bounds.bound(cfg, "fadd"), "imm": edit(base, "imm"), "l1": edit(base, "l1")}


def prefetch_variants(cfg: dict) -> dict:
    base = lower_fp8.fp8_source(torch.bfloat16, **cfg)
    return {"launched": cfg, "pf8": edit(base, "pf8"), "pf16": edit(base, "pf16"), "l1": edit(base, "l1")}


def table_variants(cfg: dict) -> dict:
    """The `lds` bound beside `l1` where 16 KB more shared memory fits (not with 128 x 256 tiles)."""
    base = lower_fp8.fp8_source(torch.bfloat16, **cfg)
    out = {"launched": cfg, "l1": edit(base, "l1")}
    if cfg["BN"] != 256:
        out["lds"] = edit(base, "lds")
    return out


def layout_variants(cfg: dict) -> dict:
    """The launched kernel on a_scale stored K-major (strides (1, M): a warp's rows' scales of one K block
    share a sector; the standard (M, K/128) storage puts each row's in its own), beside `l1`."""
    return {"launched": cfg, "sa_kmajor": dict(cfg, sa_kmajor=True),
            "l1": edit(lower_fp8.fp8_source(torch.bfloat16, **cfg), "l1")}


EXACT = ("late", "reorder", "sa_kmajor", "pf8", "pf16")
SETS = {"edits": variants, "layout": layout_variants, "prefetch": prefetch_variants,
        "table": table_variants}


def check(which="edits"):
    import fp8_ab
    for shape in fp8_ab.SHAPES:
        for label, v in SETS[which](fp8_ab.global_loads(*shape, 132)).items():
            v = {k: x for k, x in v.items() if k != "sa_kmajor"}
            kern = v if "source" in v else lower_fp8.fp8_source(torch.bfloat16, **v)
            log = runtime.compile_cuda(kern["source"], name=kern["name"] + f"_{label}.cu").log
            warn = [ln for ln in log.splitlines() if "warning" in ln.lower() or "spill" in ln.lower()]
            print(shape, label, kern["name"], warn, flush=True)


def main(which: str, suite: bool):
    import fp8_ab
    from tiles.bench import fp8
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for M, N, K in fp8_ab.SHAPES:
        sets = fp8_ab.input_sets(M, N, K, suite)
        vs = SETS[which](fp8_ab.global_loads(M, N, K, sms))
        kmajor = {label: vs.pop(label) for label in [n for n, v in vs.items() if v.get("sa_kmajor")]}
        fns, outs = fp8_ab.launch_all(sets, vs)
        for label, cfg in kmajor.items():  # the same kernel, the scales' strides differ
            cfg = {k: v for k, v in cfg.items() if k != "sa_kmajor"}
            gos = [lower_fp8.launcher(x["a"], x["b"], x["sa_km"].t(), x["sb"], **cfg) for x in sets]
            gos[0][1].fill_(float("nan"))
            gos[0][0]()
            outs[label] = gos[0][1].clone()
            fns = dict(fns, **{label: lambda i, gos=gos: gos[i % len(sets)][0]()})
        torch.cuda.synchronize()
        errs = {label: fp8.error_and_bound(o, sets[0]) for label, o in outs.items()}
        bad = {label: e for label, e in errs.items() if not e[0] <= e[1] and label not in ("fadd", "imm", "l1", "lds")}
        err, lim = errs["launched"]
        same = {label: torch.equal(outs[label], outs["launched"]) for label in EXACT if label in outs}
        ms = fp8_ab.timings(fns, len(sets), suite)
        print(M, N, K, vs["launched"], f"error {err:.3g} (bound {lim:.3g})", "bitwise", same,
              "over the bound:", bad, flush=True)
        fp8_ab.print_speeds(M, N, K, ms)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a not in ("check", "--suite")]
    which = args[0] if args else "edits"
    if "check" in sys.argv[1:]:
        check(which)
    else:
        main(which, "--suite" in sys.argv[1:])
