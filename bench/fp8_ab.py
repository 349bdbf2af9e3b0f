"""Session 15: the fp8 GEMM's launched configuration against candidates, at the issue's five shapes.

    PYTHONPATH=.:bench python3 bench/fp8_ab.py tiles    # tile shapes and the scale loads
    PYTHONPATH=.:bench python3 bench/fp8_ab.py knobs    # clusters and the grouped order
    PYTHONPATH=.:bench python3 bench/fp8_ab.py groups --suite   # the grouped order, timed as the suite times
    PYTHONPATH=.:bench python3 bench/fp8_ab.py before bench/ab_before_fp8_REV.json [--suite]  # against REV's

`tiles`:
* `launched`: what tiles.gemm_fp8 runs (lower_fp8.choose; with BN 256 the turns), clamped scale loads;
* `checked`: the same with `clamp_scales=False` (predicated scale loads, the default before session 15);
* `session14`: session 14's choice (BN 128, or 256 with turns; stream-K where it picked it);
* `bm192`, `bm192_sk`: three consumer warpgroups of 64 rows (BM = 192) over 128-wide tiles, 4 stages;
  without and with stream-K.
`knobs`: the launched tile with 2-CTA clusters sharing B by multicast (without stream-K, which takes
single CTAs), group 16 and 4 in the grouped order, and (where the launcher splits) without stream-K.
`groups` (session 18): the launched tile visited 4, 12, 16 or 24 tile rows at a time (launched: 8), and
`i64`: the scale loads' K offsets in 64 bits (launched: 32, option scale_index32).
`narrow` (session 18): 128 x 96 tiles against 128 x 128 (both unsplit), and 96 with 8 ring stages.
`stma` (session 27): the launched tile with each K block's scales brought into its ring stage by TMA
(option scales_tma; the consumers read them from shared memory) against loads from global memory
(`global`); with 128 x 128 tiles also with 5 stages and without stream-K. Where K / 128 is not a multiple
of 4 (rows not 16-byte aligned: 6144 x 7168 x 2304) the scale rows come two or four at a time (session 28,
sa_group / sb_group). `stma_mn` and `global_mn` (session 28) read the scales stored transposed (M- and
N-contiguous: the A boxes are 128 contiguous floats, not 128 rows of 16 bytes), `stma_pg` copies each
K-contiguous A-scale box once per 4-block group (option sa_per_group; `stma_pg8` boxes of 8 blocks,
sa_box_blocks=8, session 29), and with the 128 x 256 tiles
`stma_bm192` / `stma_bm192_regs` try 192 x 128 tiles split by stream-K.
`boxes` (session 29): the launched kernel against 8-block A-scale boxes once per 8-block group
(sa_box_blocks=8), 4-block boxes once per group, and once a stage; where the launched tile is 128 x 256
(8192^3), 192 x 128 tiles split by stream-K with boxes per stage and per 8-block group.
`clusters` (session 35): the launched tile in 2-CTA clusters sharing B by multicast, with stream-K over
the clusters (which it now takes) and without.
`--suite` times as the standard suite does (hopper_gemm_tiles.suite_timed) instead of 20 launches back
to back.

Outputs are compared bitwise with the unsplit launched kernel's where both sum each element in the same
order (stream-K's splits change the order of one addition), then all are timed interleaved
(hopper_gemm_tiles.timed) next to torch._scaled_mm row-wise; TFLOP/s.
"""
import json
import sys

import torch

from tiles.backends.hopper import lower_fp8
from tiles.bench import fp8
from tiles.bench import run as bench_run

import hopper_gemm_tiles as ht

SHAPES = [(1024, 1536, 7168), (1024, 4608, 7168), (6144, 7168, 2304), (6144, 1536, 7168), (8192, 8192, 8192)]
BM192 = dict(BM=192, stages=4)
SESSION14 = {(1024, 1536, 7168): dict(BN=128), (1024, 4608, 7168): dict(BN=128, stream_k=True)}
PP_SK = dict(BN=256, stages=4, schedule="pingpong", stream_k=True)


def standard_form(M, N, K):
    """scales_tma_form of the standard (K-contiguous, packed) scales at this shape: rows taken two or
    four at a time where K / 128 is not a multiple of 4 (session 28), None where the rows do not divide."""
    kb = -(-K // 128)
    sa = torch.empty(M, kb, device="meta")
    sb = torch.empty(-(-N // 128), kb, device="meta")
    return lower_fp8.scales_tma_form(sa, sb.unsqueeze(1).expand(sb.shape[0], 128, kb))


def launched(M, N, K, sms):
    """What tiles.gemm_fp8 launches at this shape on the standard (K-contiguous) scales: with the tiles
    where they pay, the scales by TMA into the ring stages where a tensor map describes them; else loads
    from global memory, their K offsets in 32 bits (they fit at every shape here)."""
    cfg = lower_fp8.launch_options(M, N, K, sms)
    form = standard_form(M, N, K)
    extra = lower_fp8.tma_scale_options(cfg, form) if form else {}
    cfg = dict(cfg, **extra) if extra else dict(cfg, scale_index32=True)
    return dict(cfg, defer_store=True) if lower_fp8.defer_store_pays(cfg, K) else cfg


def global_loads(M, N, K, sms):
    """The launched tile with the scales loaded from global memory in the loop (what tiles.gemm_fp8
    launched before session 27, and what the source edits of fp8_bounds.py, fp8_promote_edits.py and
    ffma_bits.py apply to)."""
    return dict(lower_fp8.launch_options(M, N, K, sms), scale_index32=True)


def tile_variants(M, N, K, sms):
    cfg = launched(M, N, K, sms)
    return {"launched": cfg, "checked": dict(cfg, clamp_scales=False), "session14": SESSION14.get((M, N, K), PP_SK),
            "bm192": dict(BM192), "bm192_sk": dict(BM192, stream_k=True)}


def knob_variants(M, N, K, sms):
    cfg = launched(M, N, K, sms)
    whole = dict(cfg, stream_k=False)
    out = {"launched": cfg, "cluster2": dict(whole, cluster=2), "group16": dict(cfg, group_m=16),
           "group4": dict(cfg, group_m=4)}
    if cfg["stream_k"]:
        out["whole"] = whole
    return out


def cluster_variants(M, N, K, sms):
    """Session 35: the launched tile in 2-CTA clusters that share B by multicast (`cl2`; with stream-K, now
    over the clusters' shares), and 128 x 128 and 192 x 128 tiles split by stream-K in clusters."""
    cfg = launched(M, N, K, sms)
    out = {"launched": cfg, "cl2": dict(cfg, cluster=2)}
    for label, tile in (("bn128_sk_cl2", dict(BM=128, BN=128)), ("bm192_sk_cl2", dict(BM=192, BN=128))):
        if (cfg["BM"], cfg["BN"], cfg.get("stream_k")) != (tile["BM"], tile["BN"], True):
            out[label] = with_scales(M, N, K, dict(tile, stream_k=True, cluster=2, epilogue="regs", wide_stores=4))
    return out


def with_scales(M, N, K, cfg):
    """cfg with the scale options the launcher would add to its tile (tma_scale_options on the standard scales)."""
    form = standard_form(M, N, K)
    extra = lower_fp8.tma_scale_options(cfg, form) if form else {}
    return dict(cfg, **extra) if extra else dict(cfg, scale_index32=True)


def launch_all(sets, vs):
    """Each configuration of vs launched once on the first input set (its output poisoned first) and
    made timeable over the sets, next to row-wise torch._scaled_mm: (fns, outputs)."""
    fns, outs = {}, {}
    for label, cfg in vs.items():
        if "source" in cfg:  # a rendered kernel (fp8_source's dict, e.g. from render_before.py)
            gos = []
            for x in sets:
                out = torch.empty(x["a"].shape[0], x["b"].shape[0], dtype=torch.bfloat16, device="cuda")
                sb = x["sb"].unsqueeze(1).expand(x["sb"].shape[0], 128, x["sb"].shape[1])
                gos.append((lower_fp8.bind(cfg, x["a"], x["b"], x["sa"], sb, out), out))
        elif cfg.get("layout") == "mn":  # the scales transposed in memory (M- and N-contiguous), as views
            cfg = {k: v for k, v in cfg.items() if k != "layout"}
            gos = [lower_fp8.launcher(x["a"], x["b"], x["sa_km"].t(), x["sb_kn"].t(), **cfg) for x in sets]
        else:
            gos = [lower_fp8.launcher(x["a"], x["b"], x["sa"], x["sb"], **cfg) for x in sets]
        gos[0][1].fill_(float("nan"))
        gos[0][0]()
        outs[label] = gos[0][1].clone()
        fns[label] = lambda i, gos=gos: gos[i % len(sets)][0]()
    fns["scaled_mm_rowwise"] = lambda i: torch._scaled_mm(
        sets[i % len(sets)]["a"], sets[i % len(sets)]["b"].t(), scale_a=sets[i % len(sets)]["sa_row"],
        scale_b=sets[i % len(sets)]["sb_row"], out_dtype=torch.bfloat16)
    torch.cuda.synchronize()
    return fns, outs


def group_variants(M, N, K, sms):
    cfg = launched(M, N, K, sms)
    return {"launched": cfg, "i64": dict(cfg, scale_index32=False),
            **{f"group{g}": dict(cfg, group_m=g) for g in (4, 12, 16, 24)}}


def narrow_variants(M, N, K, sms):
    """Session 18: 128 x 96 tiles (the launcher's where 128-wide ones leave SMs idle) against 128 x 128,
    unsplit, and with a ring of 8 stages (28 KB a stage)."""
    tile = dict(BM=128, stream_k=False, epilogue="regs", wide_stores=4, scale_index32=True)
    return {"launched": launched(M, N, K, sms), "bn128": dict(tile, BN=128), "bn96": dict(tile, BN=96),
            "bn96_s8": dict(tile, BN=96, stages=8)}


def stma_variants(M, N, K, sms):
    """Session 27: the scales by TMA into the ring stages (the standard layouts: K-contiguous) against
    loads from global memory (`global`), on the launched tile."""
    cfg = launched(M, N, K, sms)
    glob = {k: v for k, v in cfg.items()
            if k not in ("scales_tma", "sa_major", "sb_major", "sa_group", "sb_group", "sa_per_group", "sa_box_blocks")}
    glob["scale_index32"] = True
    out = {"launched": cfg, "global": glob}
    if M % 4 == 0 and (N // 128) % 4 == 0:  # session 28: the scales' boxes along M and N (contiguous rows)
        out["stma_mn"] = dict(glob, scale_index32=False, scales_tma=True, sa_major="m", sb_major="n", layout="mn")
        out["global_mn"] = dict(glob, scale_index32=False, layout="mn")
    form = standard_form(M, N, K)
    if form is None:
        return out
    tma = dict(glob, scale_index32=False, **form)
    if not cfg.get("scales_tma"):
        out["stma"] = tma
    if form["sa_group"] == 1:  # session 28: one A-scale box per 4-block group, or per stage
        out["stma_pg"] = dict(tma, sa_per_group=True)
        out["stma_pg8"] = dict(tma, sa_per_group=True, sa_box_blocks=8)  # session 29: 8-block boxes
        out["stma_stage"] = tma
    if cfg["BN"] == 256:  # session 28: 192 x 128 tiles split by stream-K, stores by TMA and from registers
        bm192 = dict(BM=192, BN=128, stream_k=True, **form)
        out["stma_bm192"] = bm192
        out["stma_bm192_regs"] = dict(bm192, epilogue="regs", wide_stores=4)
    if cfg["BN"] == 128 and cfg["BM"] == 128:
        out["stma_s5"] = dict(tma, stages=5)
        out["stma_whole"] = dict(tma, stream_k=False)
        out["global_whole"] = dict(glob, stream_k=False)
    return out


def box_variants(M, N, K, sms):
    """Session 29: the launched kernel (at its first call: per-group boxes of 4 blocks with 128 x 128
    stream-K and 192 x 128 tiles, per stage elsewhere; since, 8-block boxes on those two tiles) against
    boxes of 8 blocks once per 8-block group (sa_box_blocks=8), per group of 4, and per stage, on the
    launched tile; K-contiguous scales with 16-byte aligned rows."""
    out = {"launched": launched(M, N, K, sms)}
    form = standard_form(M, N, K)
    if form is None or form["sa_group"] != 1:
        return out
    if out["launched"]["BN"] == 256:  # 8192^3: 192 x 128 tiles split by stream-K instead, boxes per stage / 8-block group
        bm192 = dict(BM=192, BN=128, stream_k=True, **form)
        out.update(bm192_pg8=dict(bm192, sa_per_group=True, sa_box_blocks=8), bm192=bm192)
        return out
    tma = {k: v for k, v in out["launched"].items() if k not in ("sa_per_group", "sa_box_blocks")}
    out.update(pg8=dict(tma, sa_per_group=True, sa_box_blocks=8), pg4=dict(tma, sa_per_group=True), stage=tma)
    return out


def defer_variants(M, N, K, sms):
    """Session 30: the launched 128 x 256 ping-pong kernel with and without each whole tile stored under
    the next tile's first burst (defer_store), at the shapes that launch it."""
    cfg = launched(M, N, K, sms)
    if cfg.get("schedule") != "pingpong":
        return {}
    other = not cfg.get("defer_store", False)
    return {"launched": cfg, "defer" if other else "no_defer": dict(cfg, defer_store=other)}


def before_variants(path):
    """The launched configuration against the same one rendered from an earlier commit's templates."""
    kerns = json.load(open(path))

    def variants(M, N, K, sms):
        return {"launched": global_loads(M, N, K, sms), "before": kerns[f"{M},{N},{K}"]}  # render_before's forms
    return variants


def input_sets(M, N, K, suite=False):
    """Fresh random problems to rotate through: with `suite`, the suite's rotation (enough sets that
    consecutive launches miss in L2); else two."""
    n_sets = bench_run._n_sets(M * K + N * K + 2 * M * N, torch.device("cuda")) if suite else 2
    return [fp8.make_set(M, N, K, torch.device("cuda"), seed) for seed in range(n_sets)]


def timings(fns, n_sets, suite=False):
    """Median ms of each of fns, interleaved: as the standard suite times (suite) or back to back."""
    return ht.suite_timed(fns, n_sets) if suite else ht.timed(fns, rounds=11)


def print_speeds(M, N, K, ms):
    """One line: each variant's TFLOP/s and, in brackets, its speed over `launched`."""
    print("   ", " ".join(f"{n}={2 * M * N * K / (t * 1e-3) / 1e12:.0f}({ms['launched'] / t:.3f})"
                        for n, t in ms.items()), flush=True)


def main(which, suite=False, before=None):
    variants = {"tiles": tile_variants, "knobs": knob_variants, "groups": group_variants, "narrow": narrow_variants,
                "stma": stma_variants, "boxes": box_variants, "defer": defer_variants, "clusters": cluster_variants,
                "before": before and before_variants(before)}[which]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for M, N, K in SHAPES:
        vs = variants(M, N, K, sms)
        if not vs:  # the set has nothing to try at this shape
            continue
        sets = input_sets(M, N, K, suite)
        fns, outs = launch_all(sets, vs)
        unsplit = [label for label, cfg in vs.items() if not cfg.get("cfg", cfg).get("stream_k")]
        same = {label: torch.equal(outs[unsplit[0]], outs[label]) for label in unsplit}
        if not unsplit:  # every variant splits: the split tiles' partial sums may add in another order
            ref = outs["launched"].float()
            tol = 1e-2 * ref.abs().max().item()
            same = {label: bool((o.float() - ref).abs().max().item() <= tol) for label, o in outs.items()}
            unsplit = ["launched (within 1% of its largest output)"]
        ms = timings(fns, len(sets), suite)
        print(M, N, K, "launched", vs["launched"], "bitwise vs", unsplit[0], same, flush=True)
        if which == "clusters":  # the clusters' splits add in another order: each against float64
            print("    error / bound:", {label: "%.3g / %.3g" % fp8.error_and_bound(o, sets[0]) for label, o in outs.items()})
        if which in ("stma", "boxes", "defer"):  # the same tiles and splits: every variant must store the launched kernel's bits
            print("    bitwise vs launched:", {label: torch.equal(outs["launched"], o) for label, o in outs.items()})
        print_speeds(M, N, K, ms)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--suite"]
    main(args[0] if args else "tiles", "--suite" in sys.argv[1:], args[1] if len(args) > 1 else None)
