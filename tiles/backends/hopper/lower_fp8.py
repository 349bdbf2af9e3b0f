"""IR → Hopper CUDA C++: the block-scaled fp8 GEMM (tiles/kernels/gemm_fp8.py) on templates/gemm_fp8.cu.j2.

The lowering recognises the tile program's shape and checks each assumption the template makes:

* f32 register tiles `acc` (zeroed before the loop) and `part`; one pipelined loop over cdiv(K, BK);
* in it: load_async(a, A[:, :], row=R, col=kb*BK), load_async(b, B[:, :], row=C, col=kb*BK), one wait,
  load(sa, SA[:, kb], row=R), load(sb, SB[n, :, kb]), mma(part, a, b, tb=True, accumulate=False),
  mul_row(part, part, sa), mul_col(part, part, sb), add(acc, acc, part);
* after it: store(C[:, :], acc, row=R, col=C);
* BK = BN = 128 (one promotion per scale block; one B scale per tile) and BM = 64 x consumers.

Lowering options (fp8_source's): BN=256 puts two of the program's 128-wide N tiles in one CTA (two
B scale blocks; the promotion runs per N half), BN=96 three quarters of one (a CTA's columns may
straddle two B scale blocks: the promotion takes each 8-column group's scale; where 128-wide tiles
leave SMs idle), BM=192 takes 192 rows of the program's 128-row tiles in three
consumer warpgroups (where 192-row tiles fill the SMs better: each output element is summed exactly as
with 128 rows), cluster=2 pairs CTAs along M that share each B tile
through TMA multicast (with stream-K the shares are the clusters'; the launcher's choice with 128 x 128
tiles split by stream-K: cluster_pays), schedule="pingpong" (BN=256: the two consumer warpgroups take turns issuing their
wgmmas, ordered by named barriers, so one promotes while the other's run; +0.7 to +1.4 % on the H200, the
launcher's choice with BN=256), stream_k=True splits the last waves' tiles along K over every SM
(include/tiles/schedule.h; the launcher passes a workspace and picks the tile and split with `choose`),
clamp_scales (on: rows past M and blocks past N read the last row's / block's scales, so every scale load
is unconditional; +2 to +8 % on the H200, session 15), scales_tma (each K block's scales come into its
ring stage by TMA beside the tiles and the consumers read them from shared memory; +1 to +10 % on the
H200, session 27; the launcher's choice where the scales' layout allows, but not for K-contiguous
scales on 128 x 128 tiles split by stream-K: stage_scales_pay, scales_tma_form; sa_group / sb_group take
K-contiguous scale rows that are not 16-byte aligned, K/128 not a multiple of 4, 2 or 4 rows at a time:
row_group; sa_per_group copies a K-contiguous A-scale box, which holds four K blocks, once per 4-block
group instead of once a stage: 1.016-1.017x with 128 x 128 stream-K and 192 x 128 tiles in one H200
run, session 28; sa_box_blocks=8 makes the box 8 blocks, a row's 32-byte sector, copied once per
8-block group, the launcher's choice on those two tiles since session 29: tma_scale_options), defer_store
(pingpong: each whole tile stored under the next tile's first burst, its first K block peeled; the
launcher's choice with up to 32 K blocks, 1.025-1.030x at 6144 x 7168 x 2304 in session 30:
defer_store_pays), plus
stages, group_m, overlap, epilogue and the register split.

The four ops after the mma become one fused promotion (acc += part * (sa[row] * sb)) per thread.
The row-wise program (gemm_fp8_rowwise: SA (M, 1), SB (1, N), applied to acc after the loop) takes
the same template with option rowwise: its promotion is acc += part, and scale_tile multiplies the
finished tile by sa[row] * sb[col] in the epilogue, after stream-K's partial sums are added (with the TMA
store one 64-column chunk at a time, so with defer_store the scaling runs under the next tile's first burst).
The grid becomes persistent CTAs visiting the same tiles in grouped order. Hopper's fp8 wgmma reads
both operands K-major from shared memory, so the launcher hands it K-major A and B: an operand whose
K axis is not contiguous (the transposed layouts) is copied into a K-major tensor first (one
transpose per call by transpose.py, counted in its time; the scales are read in place through their
strides).
"""
from __future__ import annotations

import math
from typing import Optional

from tiles.core import ir
from tiles.core.lowering import Lowered, Lowering, LoweringError, header_files, match_block_scaled_gemm
from tiles.core.patterns import Pipelined, ProducerConsumer

from . import gemm_probe, runtime, transpose

ARCH = runtime.ARCH
DEFAULTS = dict(stages=6, group_m=8, producer_regs=None, consumer_regs=None, epilogue="tma", overlap=True, cluster=1,
                schedule="cooperative", stream_k=False, clamp_scales=True, wide_stores=0, scale_index32=False,
                scales_tma=False, sa_major="k", sb_major="k", sa_group=1, sb_group=1,
                sa_per_group=False, sa_box_blocks=4, defer_store=False, rowwise=False)
# setmaxnreg budgets (producer, consumer) by consumer warpgroups, where the options leave them open: the
# register file is 64K a SM. Three consumers get 160 each: acc (64) + part (64) fit, a second scratch does not.
REGS = {1: (40, 232), 2: (40, 232), 3: (24, 160)}
# What the lowering picks where the options leave it open: the CTA's N width (the tile program's BN is the
# 128-wide scale block; 256 = two of its tiles per CTA). Set from the H200 measurements (bench/hopper_fp8_notes.md).
LOWER_DEFAULTS = dict(BN=128)
# Per-tile speed of BN=256 over BN=128 when both fill the chip (H200, 2026-11-29: 1121 vs 1034 TFLOP/s at
# 8192^3, 1037 vs 989 at 6144x7168x2304); its tiles are twice as large, so it wins only with enough of them.
BN256_SPEEDUP = 1.08
# The same for 192 x 128 tiles (three consumer warpgroups), per unit of area (H200, session 15,
# bench/fp8_ab.py tiles: 1188 TFLOP/s at 8192^3 over 21 waves against BN=256's 1229 over 15.5 + stream-K).
BM192_SPEEDUP = 1.04
# The time of a 128 x 96 tile (epilogue from registers, no stream-K) in 128 x 128 tile times: three
# quarters of the work, but 0.93-0.95 of the time (H200, session 18: one wave of each at 1024 x 1536 x
# 7168, 957 against 909 TFLOP/s back to back, 903 against 842 in the suite's timing). It wins where
# 128-wide tiles leave SMs idle (there: 96 tiles of 128 x 128 on 132 SMs, 128 of 128 x 96).
BN96_COST = 0.94


# A split tile's extra cost under stream-K, in tile times: its fix-up (a partial sum stored, waited for and
# added), and a second ramp and epilogue where a tile is cut (H200, session 14: fitted to the five issue
# shapes, the model then picks each shape's measured best, bench/hopper_fp8_notes.md).
SK_OVERHEAD = 0.3


# The same three for the row-wise kernel (option rowwise), whose K loop has no scale path: its 96-wide
# tiles cost their area and a little more (no block edge to straddle), and 192 x 128 tiles run as fast
# per area as 128 x 256 ones. H200, session 34 (bench/fp8_rowwise_ab.py, the suite's timing, over the
# tiles the block-scaled constants chose): 128 x 96 1.216 at 1024 x 4608 x 7168 (over 128 x 128 with
# stream-K), 192 x 128 with stream-K 1.036 at 6144 x 7168 x 2304 and 1.013 at 8192^3 (over 128 x 256).
ROWWISE_SPEEDS = dict(BN256_SPEEDUP=1.08, BM192_SPEEDUP=1.09, BN96_COST=0.78)


def choose(M: int, N: int, K: int, sms: int, rowwise: bool = False) -> dict:
    """The CTA's tile (BM x BN) and whether to split the last tiles along K (stream-K), for an M x N x K
    problem on `sms` persistent CTAs. Dealt whole, each CTA takes ceil(tiles / sms) tiles in turn, so the
    run takes that many tile times; split, tiles / sms of them plus SK_OVERHEAD. In 128 x 128 tile times,
    a 128 x 256 tile costs 2 / BN256_SPEEDUP, a 192 x 128 one 1.5 / BM192_SPEEDUP and a 128 x 96 one
    BN96_COST (never split); ROWWISE_SPEEDS for the row-wise kernel."""
    kblocks = -(-K // 128)
    sp = ROWWISE_SPEEDS if rowwise else dict(BN256_SPEEDUP=BN256_SPEEDUP, BM192_SPEEDUP=BM192_SPEEDUP,
                                             BN96_COST=BN96_COST)
    best = None
    for bm, bn, per_tile in ((128, 128, 1.0), (128, 256, 2 / sp["BN256_SPEEDUP"]),
                             (192, 128, 1.5 / sp["BM192_SPEEDUP"]), (128, 96, sp["BN96_COST"])):
        tiles = -(-M // bm) * -(-N // bn)
        costs = [(-(-tiles // sms) * per_tile, False)]
        if bn != 96 and split_tiles(tiles, sms, kblocks):  # 96-wide tiles are not split
            costs.append(((tiles / sms + SK_OVERHEAD) * per_tile, True))
        for cost, sk in costs:
            if best is None or cost < best[0]:
                best = (cost, bm, bn, sk)
    return dict(BM=best[1], BN=best[2], stream_k=best[3])


SMEM_LIMIT = gemm_probe.SMEM_LIMIT


def fp8_source(out_dtype="bf16", *, name: str = "", BM=128, BN=128, BK=128, consumers=None, ir_name="gemm_fp8",
               ir_text="(rendered directly)", **over) -> dict:
    """Render templates/gemm_fp8.cu.j2 for one configuration: {source, name, cfg, smem, threads}.
    `consumers` (warpgroups of 64 rows) defaults to BM / 64, `stages` to the deepest ring up to 6 that fits."""
    consumers = BM // 64 if consumers is None else consumers
    unknown = set(over) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"unknown gemm_fp8 options {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    cfg = dict(DEFAULTS, **over, BM=BM, BN=BN, BK=BK, consumers=consumers)
    ot = gemm_probe.ctype(out_dtype)
    if BK != 128 or BN not in (96, 128, 256):
        raise ValueError(f"BK must be 128 and BN 128 (the scale block; BN=256 is two of them, BN=96 three quarters "
                         f"of one), got BK={BK}, BN={BN}")
    if BN == 96 and (cfg["stream_k"] or cfg["epilogue"] != "regs" or not cfg["clamp_scales"]
                     or consumers != 2 or cfg["schedule"] != "cooperative"):
        got = {k: cfg[k] for k in ("schedule", "epilogue", "clamp_scales", "stream_k")}
        raise ValueError("BN=96 takes two consumer warpgroups, the cooperative schedule, epilogue='regs' (a 96-wide "
                         "tile is not whole 64-column TMA boxes), clamp_scales=True and no stream_k; got "
                         f"consumers={consumers}, {got}")
    if consumers not in REGS:
        raise ValueError(f"consumers must be one of {sorted(REGS)} (64 rows each), got {consumers}")
    regs = REGS[consumers]
    cfg["producer_regs"] = regs[0] if cfg["producer_regs"] is None else cfg["producer_regs"]
    cfg["consumer_regs"] = regs[1] if cfg["consumer_regs"] is None else cfg["consumer_regs"]
    if BN == 256 or consumers == 3:
        cfg["overlap"] = False  # acc + one 64-register scratch fill the budget: no room for a second
    if cfg["schedule"] not in ("cooperative", "pingpong"):
        raise ValueError(f"schedule must be 'cooperative' or 'pingpong', got {cfg['schedule']!r}")
    if cfg["schedule"] == "pingpong" and (BN != 256 or consumers != 2):
        raise ValueError(f"schedule='pingpong' takes turns between 2 consumer warpgroups over BN=256's two N halves; "
                         f"got BN={BN}, consumers={consumers}")
    if cfg["cluster"] not in (1, 2):
        raise ValueError(f"cluster must be 1 or 2, got {cfg['cluster']}")
    if BM != 64 * consumers:
        raise ValueError(f"BM={BM} must be 64 rows per consumer warpgroup ({consumers} consumers)")
    if cfg["epilogue"] not in ("regs", "tma"):
        raise ValueError(f"epilogue must be 'regs' or 'tma', got {cfg['epilogue']!r}")
    if cfg["wide_stores"] not in (0, 2, 4):
        raise ValueError(f"wide_stores is 0 (a pair a store), 2 or 4 pairs a store, got {cfg['wide_stores']!r}")
    if not isinstance(cfg["stream_k"], bool):
        raise TypeError(f"stream_k must be True or False, got {cfg['stream_k']!r}")
    if not isinstance(cfg["clamp_scales"], bool):
        raise TypeError(f"clamp_scales must be True or False, got {cfg['clamp_scales']!r}")
    if not isinstance(cfg["scale_index32"], bool):
        raise TypeError(f"scale_index32 must be True or False, got {cfg['scale_index32']!r}")
    if not isinstance(cfg["scales_tma"], bool):
        raise TypeError(f"scales_tma must be True or False, got {cfg['scales_tma']!r}")
    if cfg["sa_major"] not in ("k", "m") or cfg["sb_major"] not in ("k", "n"):
        raise ValueError(f"sa_major is 'k' or 'm' and sb_major 'k' or 'n' (the scales' contiguous axis), got "
                         f"{cfg['sa_major']!r}, {cfg['sb_major']!r}")
    if cfg["scales_tma"] and cfg["scale_index32"]:
        raise ValueError("scale_index32 sizes the scale loads from global memory; with scales_tma the consumers "
                         "read the scales from shared memory")
    for side, major in (("sa", "sa_major"), ("sb", "sb_major")):
        group = cfg[f"{side}_group"]
        if group not in (1, 2, 4):
            raise ValueError(f"{side}_group is 1, 2 or 4 (scale rows a 16-byte aligned row of the view holds), "
                             f"got {group!r}")
        if group > 1 and not (cfg["scales_tma"] and cfg[major] == "k"):
            raise ValueError(f"{side}_group={group} takes K-contiguous scales by TMA (scales_tma=True, {major}='k'), "
                             f"got scales_tma={cfg['scales_tma']!r}, {major}={cfg[major]!r}")
    if not isinstance(cfg["sa_per_group"], bool):
        raise TypeError(f"sa_per_group must be True or False, got {cfg['sa_per_group']!r}")
    if cfg["sa_per_group"] and not (cfg["scales_tma"] and cfg["sa_major"] == "k" and cfg["sa_group"] == 1):
        raise ValueError("sa_per_group copies one A-scale box of sa_box_blocks K blocks per group: it takes scales_tma=True, "
                         f"sa_major='k' and sa_group=1, got scales_tma={cfg['scales_tma']!r}, "
                         f"sa_major={cfg['sa_major']!r}, sa_group={cfg['sa_group']!r}")
    if cfg["sa_box_blocks"] not in (4, 8) or (cfg["sa_box_blocks"] == 8 and not cfg["sa_per_group"]):
        raise ValueError(f"sa_box_blocks is 4, or 8 with sa_per_group=True (K blocks an A-scale box holds), got "
                         f"sa_box_blocks={cfg['sa_box_blocks']!r}, sa_per_group={cfg['sa_per_group']!r}")
    if not isinstance(cfg["rowwise"], bool):
        raise TypeError(f"rowwise must be True or False, got {cfg['rowwise']!r}")
    if cfg["rowwise"] and (cfg["scales_tma"] or cfg["scale_index32"]):
        raise ValueError("rowwise scales multiply the finished tile once, read from global memory: they take "
                         f"scales_tma=False and scale_index32=False, got {cfg['scales_tma']!r}, {cfg['scale_index32']!r}")
    if not isinstance(cfg["defer_store"], bool):
        raise TypeError(f"defer_store must be True or False, got {cfg['defer_store']!r}")
    if cfg["defer_store"] and cfg["schedule"] != "pingpong":
        raise ValueError("defer_store stores a finished tile under the next tile's first burst of wgmmas in turns: it "
                         f"takes schedule='pingpong' (BN=256), got schedule={cfg['schedule']!r}, BN={BN}")
    if "stages" not in over:  # the default ring, as deep as shared memory allows
        while cfg["stages"] > 2 and _smem(cfg, BM, BN, BK) > SMEM_LIMIT:
            cfg["stages"] -= 1
    suffix, legend = _name_tags(cfg)
    name = (name or "tiles_gemm_fp8_{ot}_{BM}x{BN}x{BK}".format(ot=ot, **cfg)) + suffix
    smem = _smem(cfg, BM, BN, BK)
    if smem > SMEM_LIMIT:
        raise ValueError(f"{cfg['stages']} stages need {smem} bytes of shared memory (limit {SMEM_LIMIT})")
    boxes = _scale_boxes(cfg, BM, BN) if cfg["scales_tma"] else None
    src = gemm_probe._env().get_template("gemm_fp8.cu.j2").render(name=name, out_t=ot, ir_name=ir_name, legend=legend,
                                                                  ir_text=ir_text, scale_boxes=boxes, **cfg)
    return dict(source=src, name=name, cfg=cfg, smem=smem, threads=128 * (1 + consumers))


def _name_tags(cfg: dict):
    """The entry name's suffix (one tag an option, e.g. _s6_g8_tma_ov) and its legend for the header."""
    major = {"k": "K", "m": "M", "n": "N"}
    tags = [(f"s{cfg['stages']}", f"{cfg['stages']} ring stages", True),
            (f"g{cfg['group_m']}", f"tile rows in groups of {cfg['group_m']}", True),
            (cfg["epilogue"], {"tma": "the tile stored by TMA", "regs": "the tile stored from registers"}[cfg["epilogue"]], True),
            ("ov", "the promotion under the next block's wgmmas", cfg["overlap"]),
            (f"cl{cfg['cluster']}", f"{cfg['cluster']}-CTA clusters sharing B", cfg["cluster"] > 1),
            ("pp", "the consumer warpgroups take turns (ping-pong)", cfg["schedule"] == "pingpong"),
            ("sk", "stream-K over the last waves", cfg["stream_k"]),
            ("checked", "scale loads bounds-checked", not cfg["clamp_scales"]),
            (f"wd{cfg['wide_stores']}", f"{cfg['wide_stores']} pairs a store", bool(cfg["wide_stores"])),
            ("i32", "32-bit scale offsets", cfg["scale_index32"]),
            (f"st{cfg['sa_major']}{cfg['sb_major']}",
             f"scales by TMA, A's along {major[cfg['sa_major']]} and B's along {major[cfg['sb_major']]}", cfg["scales_tma"]),
            (f"rg{cfg['sa_group']}{cfg['sb_group']}",
             f"scale rows {cfg['sa_group']} (A) and {cfg['sb_group']} (B) to an aligned row", cfg["sa_group"] > 1 or cfg["sb_group"] > 1),
            ("pg" + ("8" if cfg["sa_box_blocks"] == 8 else ""),
             f"one A-scale box of {cfg['sa_box_blocks']} K blocks a row group", cfg["sa_per_group"]),
            ("ds", "a finished tile stored under the next tile's first wgmmas", cfg["defer_store"]),
            ("rw", "row-wise scales", cfg["rowwise"])]
    on = [(t, meaning) for t, meaning, used in tags if used]
    return "".join("_" + t for t, _ in on), ", ".join(f"{t} = {meaning}" for t, meaning in on)


def _smem(cfg: dict, BM: int, BN: int, BK: int) -> int:
    cfg = dict(DEFAULTS, **cfg)  # the lowering sizes its ring from its options before fp8_source fills them in
    smem = cfg["stages"] * (BM + BN) * BK + 1024 + 1024
    if cfg["scales_tma"]:  # each stage's scale boxes (sv: 128-byte aligned)
        boxes = zip(_scale_boxes(cfg, BM, BN), _scale_copies(cfg, BN))
        smem += cfg["stages"] * sum(n * (-(-4 * box[0] * box[1] // 128) * 128) for box, n in boxes)
    if cfg["epilogue"] == "tma":
        smem += cfg["consumers"] * 2 * 64 * 128
    return smem


def _scale_boxes(cfg: dict, BM: int, BN: int):
    """The TMA boxes (innermost first, in floats) of one K block's A and B scales (option scales_tma):
    the template's sa_box and sb_box. A box starts 16-byte aligned along the contiguous axis (the H200
    refuses others, session 27, bench/stma_probe.py): along K it is the 4-block group of the stage's
    block (with sa_box_blocks=8 the 8-block group); along N, 8 blocks from the tile's first rounded
    down to 4. With rows grouped (sa_group, sb_group > 1: rows of the view that hold `group` scale rows
    each), a stage copies one box per row phase of A (BM / group rows) and one per B block
    (_scale_copies)."""
    sb_blocks = 1 if BN == 128 else 2
    sa_box = (cfg["sa_box_blocks"], BM // cfg["sa_group"]) if cfg["sa_major"] == "k" else (BM, 1)
    sb_box = ((4, 1) if cfg["sb_group"] > 1 else (4, sb_blocks)) if cfg["sb_major"] == "k" else (8, 1)
    return sa_box, sb_box


def _scale_copies(cfg: dict, BN: int):
    """How many of _scale_boxes' A and B boxes a stage copies."""
    return cfg["sa_group"], (1 if BN == 128 else 2) if cfg["sb_group"] > 1 else 1


def row_group(row_stride: int) -> int:
    """Scale rows that one 16-byte aligned row of a view holds: a K-contiguous scale tensor whose rows
    are `row_stride` floats apart (K/128 of them, not always a multiple of 4: 18 at K = 2304) is viewed as
    rows of row_group(stride) of its rows, which TMA can describe (outer strides a multiple of 16 bytes)."""
    return 4 // math.gcd(row_stride, 4)


def scales_tma_form(SA, SB) -> Optional[dict]:
    """The options that take these scales into the ring stages by TMA (scales_tma, sa_major, sb_major,
    sa_group, sb_group), or None where a tensor map cannot describe them: TMA needs one contiguous
    axis, a 16-byte aligned base and the other axis's stride a multiple of 16 bytes. K-contiguous rows
    that are not 16-byte aligned are taken `group` rows at a time (row_group), where the row count
    divides by it (the view's last row would reach past the tensor otherwise). SB is bind's 3-D
    per-column view."""
    def major(strides, rows, names):  # strides (other axis, K); names ("k", ...) for K-contiguous first
        if strides[1] == 1 and strides[0] >= 1:
            group = row_group(strides[0])
            return (names[0], group) if rows % group == 0 else None
        if strides[0] == 1 and (strides[1] * 4) % 16 == 0:
            return names[1], 1
        return None
    if SA.data_ptr() % 16 or SB.data_ptr() % 16 or SA.dtype != SB.dtype or SA.element_size() != 4:
        return None
    sa = major(SA.stride(), SA.shape[0], ("k", "m"))
    sb = major((SB.stride(0), SB.stride(2)), SB.shape[0], ("k", "n"))
    if sa is None or sb is None:
        return None
    return dict(scales_tma=True, sa_major=sa[0], sb_major=sb[0], sa_group=sa[1], sb_group=sb[1])


class Fp8GemmLowering(Lowering):
    backend = "hopper"
    template_dir = str(gemm_probe.TEMPLATES)

    def __init__(self, kernel: ir.Kernel, arch: Optional[str] = None, **options):
        super().__init__(kernel, arch or ARCH)
        if self.arch != ARCH:
            raise LoweringError(f"hopper: fp8 wgmma and setmaxnreg need arch {ARCH!r}, got {self.arch!r}")
        self.options = options

    def _fail(self, why: str):
        raise LoweringError(f"hopper: kernel {self.k.name!r} is not the block-scaled fp8 GEMM "
                            f"templates/gemm_fp8.cu.j2 implements: {why}")

    def match(self) -> dict:
        A, B = self.k.params[0], self.k.params[1]
        if len(self.k.params) == 5 and (A.dtype.name != "f8e4m3" or B.dtype != A.dtype):
            raise LoweringError(f"hopper: fp8 GEMM inputs must both be f8e4m3 (OCP float8_e4m3fn); got A {A.dtype}, "
                                f"B {B.dtype} (float8_e4m3fnuz is the format of AMD gfx942)")
        return match_block_scaled_gemm(self.k, self._fail)

    def _config(self, g: dict) -> dict:
        p = self.k.pattern
        if not isinstance(p, (ProducerConsumer, Pipelined)):
            raise LoweringError(f"hopper: no fp8 GEMM schedule for pattern {p.describe()}")
        consumers = p.consumers if isinstance(p, ProducerConsumer) else 2
        cfg = dict(stages=p.stages, consumers=consumers, BN=LOWER_DEFAULTS["BN"] if g["BN"] == 128 else g["BN"],
                   BM=g["BM"])
        if "group" in self.k.constexprs:
            cfg["group_m"] = int(self.k.constexprs["group"])
        cfg.update(self.options)
        cfg["rowwise"] = g["scaling"] == "row"
        if cfg["BM"] != g["BM"]:  # the rows of a CTA's tile: the program's, or 192 from its 128 (three consumers)
            if not (g["BM"] == 128 and cfg["BM"] == 192):
                raise LoweringError(f"hopper: fp8 GEMM option BM={cfg['BM']}: a CTA takes the program's {g['BM']} "
                                    f"rows, or 192 rows in three consumer warpgroups where the program's tile has 128")
            cfg["consumers"] = 3
        if "stages" not in self.options:  # the pattern's ring depth, as deep as shared memory allows
            while cfg["stages"] > 2 and _smem(cfg, cfg["BM"], cfg["BN"], g["BK"]) > SMEM_LIMIT:
                cfg["stages"] -= 1
        return cfg

    def lower(self) -> Lowered:
        g = self.match()
        cfg = self._config(g)
        BN, BM = cfg.pop("BN"), cfg.pop("BM")
        if BN != g["BN"] and not (g["BN"] == 128 and BN in (96, 256)):
            raise LoweringError(f"hopper: fp8 GEMM option BN={BN}: a CTA takes one or two of the program's "
                                f"{g['BN']}-wide tiles (BN=128 or 256), or three quarters of one (BN=96)")
        name = f"tiles_{self.k.name}_hopper_{g['C'].dtype.name}_{BM}x{BN}x{g['BK']}"
        try:
            kern = fp8_source(g["C"].dtype.name, name=name, BM=BM, BN=BN, BK=g["BK"],
                              ir_name=self.k.name, ir_text=self.k.text(), **cfg)
        except (ValueError, TypeError) as e:
            raise LoweringError(f"hopper: fp8 GEMM {BM}x{BN}x{g['BK']} {cfg}: {e}") from None
        A, B, SA, SB, C = g["A"], g["B"], g["SA"], g["SB"], g["C"]
        args = [("tma", A), ("tma", B), ("tma_out", C)]
        if kern["cfg"]["scales_tma"]:
            args += [("tma", SA), ("tma", SB)]
            args += [("i32", f"{tensor}'s row stride (rows taken {kern['cfg'][f'{side}_group']} at a time)")
                     for tensor, side in (("a_scale", "sa"), ("b_scale", "sb")) if kern["cfg"][f"{side}_group"] > 1]
            args += [("ptr", C)]
        elif kern["cfg"]["rowwise"]:  # the row and column strides; nothing steps along K
            args += [("ptr", C), ("ptr", SA), ("stride64", SA.strides[0]), ("i64", "0 (no K stride)"),
                     ("ptr", f"{SB.name}, contiguous (the launcher's copy where it is not)"), ("i64", "1"),
                     ("i64", "0 (no K stride)")]
        else:
            args += [("ptr", C), ("ptr", SA), ("stride64", SA.strides[0]), ("stride64", SA.strides[1]), ("ptr", SB),
                     ("stride64", SB.strides[0]), ("stride64", SB.strides[2])]
        args += [("dim", A.dims[0]), ("dim", B.dims[0]), ("dim", A.dims[1]), ("stride64", C.strides[0])]
        if kern["cfg"]["stream_k"]:  # the launcher's: split_tiles and workspace
            args += [("workspace", "f32 partial sums, BM x BN per CTA"), ("flags", "i32 per consumer warpgroup of a CTA"),
                     ("i32", "tiles split along K")]
        return Lowered(kernel=self.k, backend="hopper", arch=self.arch, entry=kern["name"], source=kern["source"],
                       block=(kern["threads"], 1, 1), shared_bytes=kern["smem"], args=args,
                       headers=header_files(str(runtime.INCLUDE_DIR)),
                       notes={"config": kern["cfg"], "template_version": runtime.TEMPLATE_VERSION,
                              "grid": "persistent: min(tiles, SMs), in clusters of `cluster` CTAs",
                              "requires": ["A and B K-major (else the launcher makes K-major copies)",
                                           "C rows 16-byte aligned for the TMA-store epilogue (else epilogue='regs')"]})

    # ---------------------------------------------------------------- launching
    _lowered: dict = {}

    @classmethod
    def prepare(cls, backend, kfn, A, B, SA, SB, C, **kwargs):
        """A zero-argument launcher for these tensors (the benchmark reuses it), or None if empty."""
        tma_out = C.stride(1) == 1 and (C.stride(0) * C.element_size()) % 16 == 0 and C.data_ptr() % 16 == 0
        options = {} if tma_out else {"epilogue": "regs"}
        rowwise = SB.dim() == 2  # gemm_fp8_rowwise: SA (M, 1), SB (1, N), read once a tile
        if kwargs.get("BN", 128) == 128 and kwargs.get("BM", 128) == 128:  # the CTA's tile, by the tile count
            options.update(launch_options(A.shape[0], B.shape[0], A.shape[1], runtime.num_sms(), rowwise))
            form = None if rowwise else scales_tma_form(SA, SB)
            if form:
                options.update(tma_scale_options(options, form))
        if not rowwise and not options.get("scales_tma") and scale_offsets_fit(A, SA, SB):
            options["scale_index32"] = True
        if defer_store_pays(options, A.shape[1], rowwise):
            options["defer_store"] = True
        key = (id(kfn.trace(A, B, SA, SB, C, **kwargs)), tuple(sorted(options.items())))
        low = cls._lowered.get(key)
        if low is None:  # lowering renders a template: once per specialization, not per call
            low = cls._lowered[key] = backend.lower(kfn, A, B, SA, SB, C, options=options, **kwargs)
        return bind(dict(source=low.source, name=low.entry, cfg=low.notes["config"], smem=low.shared_bytes,
                         threads=low.block[0]), A, B, SA, SB, C)

    @classmethod
    def launch(cls, backend, kfn, *args, **kwargs):
        go = cls.prepare(backend, kfn, *args, **kwargs)
        if go is not None:
            go()


def launch_options(M: int, N: int, K: int, sms: int, rowwise: bool = False) -> dict:
    """The options the launcher takes for an M x N x K problem on `sms` SMs (where the caller leaves the
    tile open): choose's tile, with turns at BN = 256 (session 12) and, with the narrower tiles, stores
    from registers, 4 pairs of a row a store (ops.h store_wide): 1.00-1.016x the TMA store at the three
    issue shapes with 128-wide tiles in two runs, 0.96 / 0.94x at the two with BN = 256 (H200, session
    17, bench/epilogue_ab.py). The row-wise kernel keeps the TMA store on 128-wide tiles (1.012 / 1.015x
    the register store at 1024 x 4608 x 7168 and 6144 x 1536 x 7168, session 34), whose epilogue also
    applies its scales, and takes defer_store where it pays (here: nothing else in its options moves
    that rule). Block-scaled 128 x 128 tiles split by stream-K run in 2-CTA clusters where cluster_pays.
    scale_index32 depends on the scales' strides: the caller adds it."""
    options = choose(M, N, K, sms, rowwise)
    if not rowwise and cluster_pays(options, M):
        options["cluster"] = 2
    if options["BN"] == 256:
        options["schedule"] = "pingpong"
    elif options["BN"] == 96 or not rowwise:
        options.update(epilogue="regs", wide_stores=4)
    if rowwise and defer_store_pays(options, K, rowwise=True):
        options["defer_store"] = True
    return options


def cluster_pays(options: dict, M: int) -> bool:
    """Whether the launcher pairs CTAs along M in 2-CTA clusters that share each B tile by multicast: with
    128 x 128 tiles split by stream-K (over the clusters' shares), where the pairs leave few CTAs computing
    a tile row past M (an even count of tile rows, or 8 or more). H200, session 35 (bench/fp8_ab.py
    clusters, over single CTAs): 1.083-1.088 back to back and 1.096-1.123 in the suite's timing at
    1024 x 4608 x 7168, in three runs; the other tiles lost or tied (128 x 256 0.98-1.03, 192 x 128
    0.98-0.99, 128 x 96 0.93-0.96). The row-wise kernel's tiles did not gain (0.95-1.02)."""
    rows = -(-M // options.get("BM", 128))
    return (options.get("BM", 128) == 128 and options.get("BN", 128) == 128 and bool(options.get("stream_k"))
            and rows >= 2 and (rows % 2 == 0 or rows >= 8))


def stage_scales_pay(options: dict, form: dict) -> bool:
    """Whether the launcher takes the scales into the ring stages by TMA (option scales_tma) with this
    tile and these scales (scales_tma_form's). H200, session 27 (bench/fp8_ab.py stma, back to back /
    suite timing, over the scale loads from global memory, K-contiguous scales): 128 x 96 1.044 / 1.041
    (1024 x 1536 x 7168), 192 x 128 1.023 / 1.042 (6144 x 1536 x 7168), 128 x 256 with turns and
    stream-K 1.036 / 1.046 (8192^3), 128 x 128 unsplit 1.013 / 1.037 (1024 x 4608 x 7168); but 128 x 128
    with stream-K 0.933 / 0.936 there, where the consumers wait on the stages' full barriers (ncu,
    session 28): its A boxes are 128 rows of 16 bytes. With the a_scale stored M-contiguous the box is
    128 contiguous floats, and that tile gains 1.096 over its loads (1083 against 988 TFLOP/s back to
    back, session 28), so only K-contiguous scales keep the loads there."""
    split_128 = options.get("BN", 128) == 128 and options.get("BM", 128) == 128 and options.get("stream_k")
    return not (split_128 and form["sa_major"] == "k")


# defer_store pays where a tile's K loop is short beside its store: 1.025-1.030x at 6144 x 7168 x 2304 (18 K
# blocks), 0.990-0.998x at 8192^3 (64), H200, session 30 (bench/fp8_ab.py defer, two runs back to back
# and one in the suite's timing)
DEFER_MAX_KBLOCKS = 32


def defer_store_pays(options: dict, K: int, rowwise: bool = False) -> bool:
    """Whether the launcher stores each whole tile under the next tile's first burst (defer_store): with
    turns (the 128 x 256 tiles), up to DEFER_MAX_KBLOCKS K blocks a tile, and scale offsets that leave
    the registers for it (with 64-bit offsets from global memory and stream-K, ptxas spills 8 bytes;
    row-wise scales have none in the loop)."""
    return options.get("schedule") == "pingpong" and -(-K // 128) <= DEFER_MAX_KBLOCKS and (
        rowwise or options.get("scales_tma") or options.get("scale_index32") or not options.get("stream_k"))


def tma_scale_options(options: dict, form: dict) -> dict:
    """The options the launcher adds for these scales (scales_tma_form's) on this tile: the form, with
    one A-scale box of 8 blocks per 8-block group (sa_per_group, sa_box_blocks=8) where that paid, else
    nothing (the loads). H200, bench/fp8_ab.py, back to back, one run each; over the kernel launched
    before: session 28 (stma), boxes of 4 blocks per 4-block group, 128 x 128 split by stream-K 1.016
    (1057 against 1041 TFLOP/s; per stage it ran 0.935) and 192 x 128 1.017 (1302 against 1280); per
    group lost at 128 x 96 (0.955) and at 8192^3's 128 x 256 (0.985). Session 29 (boxes), 8-block boxes
    over 4-block ones: 1.010 at 1024 x 4608 (1070 TFLOP/s, level with row-wise _scaled_mm) and 1.004 at
    6144 x 1536, 0.978 at 1024 x 1536's 128 x 96 (where the launcher copies per stage)."""
    per_group = form["sa_major"] == "k" and form["sa_group"] == 1 and (
        options.get("BM", 128) == 192 or (options.get("BN", 128) == 128 and options.get("stream_k")))
    if per_group:
        return dict(form, sa_per_group=True, sa_box_blocks=8)
    return dict(form) if stage_scales_pay(options, form) else {}


def scale_offsets_fit(A, SA, SB) -> bool:
    """Whether the scale loads' K offsets (K block x the scales' K stride, in elements) stay below 2^31,
    so the kernel may take them in 32 bits (option scale_index32). Rows and blocks are offset once a
    tile, in 64 bits, either way."""
    last = -(-A.shape[1] // 128) - 1
    return last * max(SA.stride(1), SB.stride(2)) < 2 ** 31


_kernels: dict = {}  # (entry, source, device) -> loaded Kernel

# A stream-K share shorter than this many K blocks spends more on filling its ring and passing its
# partial sum on than the idle SMs it fills would give.
MIN_SHARE = 4


def split_tiles(tiles: int, slots: int, kblocks: int) -> int:
    """How many of the last tiles stream-K splits over `slots` CTAs (schedule.h): none where the tiles
    fill whole waves; else the partial last wave plus one whole wave, so that a share spans about one
    and a half tiles and a head adds one or two partial sums, not the tens that splitting only the
    partial wave's few tiles over every SM would give."""
    rem = tiles % slots
    if rem == 0:
        return 0
    sk = tiles if tiles < 2 * slots else rem + slots
    if sk * kblocks < slots * MIN_SHARE or slots * sk * kblocks >= 2 ** 31:  # schedule.h counts in 32 bits
        return 0
    return sk


_workspaces: dict = {}  # (device, stream) -> (partial sums, flags)


def workspace(device, nbytes: int, nflags: int):
    """Stream-K's partial sums and flags for launches on the current stream of `device`, grown as
    needed. Launches on one stream run one after another, and each leaves every flag lowered."""
    import torch

    key = (str(device), torch.cuda.current_stream(device).cuda_stream)
    ws, flags = _workspaces.get(key, (None, None))
    if ws is None or ws.numel() < nbytes:
        ws = torch.empty(nbytes, dtype=torch.uint8, device=device)
    if flags is None or flags.numel() < nflags:
        flags = torch.zeros(nflags, dtype=torch.int32, device=device)
    _workspaces[key] = (ws, flags)
    return ws, flags


class _Kern:  # what gemm_probe._max_clusters reads of a kernel
    def __init__(self, name, smem_bytes, threads, cfg):
        self.name, self.smem_bytes, self.threads, self.cfg = name, smem_bytes, threads, cfg


def bind(kern: dict, A, B, SA, SB, C, sms: Optional[int] = None):
    """Compile/load `kern` (fp8_source's dict) and return a zero-argument launcher for these tensors,
    or None when there is nothing to compute. SB is the 3-D per-column view of the block scales.
    `sms` caps the persistent grid below the SM count (tests use it to split tiles into many shares)."""
    import torch

    M, K = A.shape
    N = B.shape[0]
    if M == 0 or N == 0 or K == 0:
        return None
    cfg = kern["cfg"]
    if cfg["rowwise"] != (SB.dim() == 2):
        raise ValueError(f"a {'row-wise' if cfg['rowwise'] else 'block-scaled'} kernel takes "
                         f"{'SA (M, 1) and SB (1, N)' if cfg['rowwise'] else 'the 3-D per-column view of the block scales'}"
                         f" as SB; got SB of shape {tuple(SB.shape)}")
    if cfg["rowwise"] and SB.stride(1) != 1 and N > 1:
        SB = SB.contiguous()  # the kernel reads a tile's column scales at fixed offsets (N floats, once a call)
    if cfg["scale_index32"] and not scale_offsets_fit(A, SA, SB):
        raise ValueError(f"scale_index32: the scales' K offsets pass 2^31 elements (a_scale strides {SA.stride()}, "
                         f"b_scale {SB.stride()}, K={K}); this kernel takes them in 32 bits, use scale_index32=False")
    # K-major operands (the fp8 wgmma's only form) with 16-byte aligned rows for TMA, as bytes
    ops8 = [A, B]
    mn = [i for i, t in enumerate(ops8) if t.stride(1) != 1 and t.shape[1] > 1]
    for i, t in zip(mn, transpose.kmajor_all([ops8[i] for i in mn])):  # the transposed layouts: K-major copies
        ops8[i] = t
    ops8 = [gemm_probe._tma_ready(t.view(torch.uint8), K) for t in ops8]
    tma_out = cfg["epilogue"] == "tma"
    kkey = (kern["name"], kern["source"], torch.cuda.current_device())
    k = _kernels.get(kkey)
    if k is None:  # compile (disk-cached) and load once per source and device
        comp = runtime.compile_cuda(kern["source"], name=kern["name"] + ".cu")
        k = _kernels[kkey] = runtime.load(comp.cubin, kern["name"])
    map_a = runtime.tensor_map_2d(ops8[0], cfg["BM"], cfg["BK"])
    cl = cfg["cluster"]
    map_b = runtime.tensor_map_2d(ops8[1], cfg["BN"] // cl, cfg["BK"])  # with multicast, each CTA fetches a share
    map_c = runtime.tensor_map_2d(C, 64, 128 // C.element_size()) if tma_out else runtime.null_map()
    if cfg["scales_tma"]:
        form = scales_tma_form(SA, SB)
        wants = ("sa_major", "sb_major", "sa_group", "sb_group")
        if form is None or any(form[key] != cfg[key] for key in wants):
            raise ValueError(f"scales_tma with {', '.join(f'{key}={cfg[key]!r}' for key in wants)}: the scales "
                             f"(a_scale strides {SA.stride()}, b_scale {(SB.stride(0), SB.stride(2))}) take "
                             f"{form or 'no tensor map (a contiguous axis, 16-byte aligned, other stride 16-byte multiple)'}")
        sa_box, sb_box = _scale_boxes(cfg, cfg["BM"], cfg["BN"])
        nb, kb = SB.shape[0], SB.shape[2]
        # K-contiguous: a view whose rows hold `group` scale rows each, row r of a group at r x stride
        # (group 1: the tensor itself); the last group's row ends at the tensor's last scale
        sa_dims = ((form["sa_group"] - 1) * SA.stride(0) + SA.shape[1], M // form["sa_group"]) \
            if cfg["sa_major"] == "k" else (M, SA.shape[1])
        sa_strides = (1, form["sa_group"] * SA.stride(0)) if cfg["sa_major"] == "k" else (1, SA.stride(1))
        sb_dims = ((form["sb_group"] - 1) * SB.stride(0) + kb, nb // form["sb_group"]) \
            if cfg["sb_major"] == "k" else (nb, kb)
        sb_strides = (1, form["sb_group"] * SB.stride(0)) if cfg["sb_major"] == "k" else (1, SB.stride(2))
        scale_maps = [runtime.tensor_map(SA, sa_box, 0, sa_dims, sa_strides),
                      runtime.tensor_map(SB, sb_box, 0, sb_dims, sb_strides)]
        # grouped rows: the producer finds a row's box along the view's row from the scales' row stride
        scale_maps += [runtime.arg_i32(s) for s, g in ((SA.stride(0), cfg["sa_group"]),
                                                       (SB.stride(0), cfg["sb_group"])) if g > 1]
    ctiles = -(-M // (cfg["BM"] * cl)) * -(-N // cfg["BN"])
    slots = (sms or runtime.num_sms()) // cl
    if cl > 1:
        slots = min(slots, gemm_probe._max_clusters(k, _Kern(kern["name"], kern["smem"], kern["threads"], cfg)))
    if cfg["scales_tma"]:
        argv = [map_a, map_b, map_c, *scale_maps, runtime.arg_ptr(C)]
    elif cfg["rowwise"]:  # a row's and a column's stride; nothing steps along K
        argv = [map_a, map_b, map_c, runtime.arg_ptr(C), runtime.arg_ptr(SA), runtime.arg_i64(SA.stride(0)),
                runtime.arg_i64(0), runtime.arg_ptr(SB), runtime.arg_i64(1), runtime.arg_i64(0)]
    else:
        argv = [map_a, map_b, map_c, runtime.arg_ptr(C), runtime.arg_ptr(SA), runtime.arg_i64(SA.stride(0)),
                runtime.arg_i64(SA.stride(1)), runtime.arg_ptr(SB), runtime.arg_i64(SB.stride(0)),
                runtime.arg_i64(SB.stride(2))]
    argv += [runtime.arg_i32(M), runtime.arg_i32(N), runtime.arg_i32(K), runtime.arg_i64(C.stride(0))]
    keep = (ops8, SA, SB, C)  # what the raw pointers in argv point into outlives the launches
    sk = split_tiles(ctiles, slots, -(-K // cfg["BK"])) if cfg["stream_k"] else 0
    grid = (slots if sk else max(1, min(ctiles, slots))) * cl
    if cfg["stream_k"]:
        ws, flags = workspace(C.device, grid * cfg["BM"] * cfg["BN"] * 4, grid * cfg["consumers"])
        argv += [runtime.arg_ptr(ws), runtime.arg_ptr(flags), runtime.arg_i32(sk)]
        keep += (ws, flags)

    def go():
        _ = keep
        k.launch((grid, 1, 1), (kern["threads"], 1, 1), argv, smem=kern["smem"])
    return go


def launcher(a, b, a_scale, b_scale, out=None, **cfg):
    """tiles.gemm_fp8's problem on a chosen configuration (fp8_source options, and `sms`: bind's), for
    tuning: (go, out). a (M, K), b (N, K) float8_e4m3fn; scales as tiles.gemm_fp8 takes them (block
    scales, or with rowwise=True a_scale (M, 1) and b_scale (1, N))."""
    import torch

    M, N = a.shape[0], b.shape[0]
    out = torch.empty(M, N, dtype=torch.bfloat16, device=a.device) if out is None else out
    if not (out.stride(1) == 1 and (out.stride(0) * out.element_size()) % 16 == 0 and out.data_ptr() % 16 == 0):
        cfg = dict(cfg, epilogue="regs")  # TMA stores need 16-byte aligned rows
    rowwise = cfg.get("rowwise", False)
    sb = b_scale if rowwise else b_scale.unsqueeze(1).expand(b_scale.shape[0], 128, b_scale.shape[1])
    sms = cfg.pop("sms", None)
    return bind(fp8_source(out.dtype, **cfg), a, b, a_scale, sb, out, sms=sms), out
