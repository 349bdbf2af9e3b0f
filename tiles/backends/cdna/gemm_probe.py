"""Render the CDNA GEMM template: ``render_gemm(arch, dtype_in, dtype_out, **cfg) -> str``.

The configuration is validated here (clear ValueErrors, before any compiler runs), the swizzle comes from
the bank model (layouts.choose_swizzle), the main loop from the schedule data (schedule.pingpong_gemm),
and the template (templates/gemm.hip.j2) only spells them out.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List

import jinja2

from . import layouts, schedule

TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
INCLUDE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")
TEMPLATE_VERSION = "cdna-gemm-1"
THREADS = 512  # 8 waves: 2 ping-pong groups x 4

# defaults per arch: gfx950 has 160 KiB LDS (256x256x64 double-buffered = 128 KiB);
# gfx942 has 64 KiB (256x256x32 double-buffered = exactly 64 KiB).
DEFAULTS = {
    "gfx950": dict(bm=256, bn=256, bk=64, mf=32, group_m=8, chunk=64, direct_a=True),
    "gfx942": dict(bm=256, bn=256, bk=32, mf=32, group_m=8, chunk=64, direct_a=False),
}
LDS_LIMIT = {"gfx942": 64 * 1024, "gfx950": 160 * 1024}
OUT_BYTES = {"f32": 4, "bf16": 2, "f16": 2}


@dataclass(frozen=True)
class GemmConfig:
    arch: str
    dtype_in: str
    dtype_out: str
    bm: int
    bn: int
    bk: int
    mf: int
    group_m: int
    chunk: int
    direct_a: bool = False  # gfx950: A via buffer_load ... lds (frees the A staging registers)
    num_xcds: int = schedule.NUM_XCDS
    threads: int = THREADS

    @property
    def kr(self) -> int:  # k-rows per thread in the transposed B stage
        return self.bk * self.bn // (8 * self.threads)

    @property
    def a_loads(self) -> int:
        return -(-self.bm * self.bk // (8 * self.threads))

    @property
    def b_loads(self) -> int:
        return self.kr

    @property
    def lds_bytes(self) -> int:
        return 2 * (self.bm + self.bn) * self.bk * 2

    @property
    def out_bytes(self) -> int:
        return OUT_BYTES[self.dtype_out]

    @property
    def swizzle(self) -> layouts.Swizzle:
        # every A / B^T access of the whole tile (A's stage writes included even with direct_a: the swizzle
        # stays valid for either A path)
        return layouts.choose_swizzle(self.arch, self.bk, self.kr, (self.mf,), self.bm, self.bn, self.threads)

    def lds_conflicts(self) -> Dict[str, int]:
        """Extra cycles per LDS access family under the bank model, worst over every instruction the kernel
        issues on its tiles (A's stage writes only when A goes through registers)."""
        acc = layouts.gemm_accesses(self.mf, self.bk, self.kr, self.bm, self.bn, self.threads, self.direct_a)
        return layouts.access_conflicts(self.arch, acc, self.swizzle)

    @property
    def mfma(self) -> layouts.Mfma:
        return layouts.MFMA[(self.arch, self.mf)]

    @property
    def mfma_mnemonic(self) -> str:
        return self.mfma.mnemonic(self.dtype_in)

    @property
    def mfma_per_logical(self) -> int:  # hardware MFMAs per 16-byte logical chunk
        return 8 // self.mfma.a.elems

    @property
    def mfma_per_cluster(self) -> int:
        wm, wn = self.bm // 4, self.bn // 8
        kslab = layouts.Logical(self.mf).kslab
        return (wm // self.mf) * (wn // self.mf) * (self.bk // kslab) * self.mfma_per_logical

    def grid(self, M: int, N: int) -> int:
        return -(-M // self.bm) * -(-N // self.bn)

    def schedule(self) -> schedule.Schedule:
        return schedule.pingpong_gemm(schedule.GemmShape(self.a_loads, self.b_loads, self.direct_a))


def _options(what: str, arch: str, dtype_in: str, dtype_out: str, defaults: dict, cfg: dict) -> dict:
    """The checks every CDNA GEMM template makes of its arguments; the template's options merged
    over its per-arch defaults."""
    if arch not in layouts.ARCHS:
        raise ValueError(f"arch: got {arch!r}; the CDNA GEMM supports {layouts.ARCHS}")
    if dtype_in not in ("bf16", "f16"):
        raise ValueError(f"dtype_in: got {dtype_in!r}; supported: bf16, f16")
    if dtype_out not in OUT_BYTES:
        raise ValueError(f"dtype_out: got {dtype_out!r}; supported: {tuple(OUT_BYTES)}")
    unknown = set(cfg) - set(defaults[arch]) - {"num_xcds"}
    if unknown:
        raise ValueError(f"unknown {what} option(s) {sorted(unknown)}; known: {sorted(defaults[arch])} + num_xcds")
    opts = {**defaults[arch], **cfg}
    if opts.get("mf") not in (16, 32):
        raise ValueError(f"mf: got {opts.get('mf')}; the MFMA base is 16 or 32")
    return opts


def gemm_config(arch: str, dtype_in: str = "bf16", dtype_out: str = "f32", **cfg) -> GemmConfig:
    c = GemmConfig(arch, dtype_in, dtype_out, **_options("GEMM", arch, dtype_in, dtype_out, DEFAULTS, cfg))
    kslab = layouts.Logical(c.mf).kslab
    if c.bm % (4 * c.mf) or c.bn % (8 * c.mf):
        raise ValueError(f"bm must be a multiple of {4 * c.mf} and bn of {8 * c.mf} for mf={c.mf} (8 waves: 2x2 halves x 4 columns); got {c.bm}x{c.bn}")
    if c.bk % kslab or c.bk * 2 % 64:
        raise ValueError(f"bk must be a multiple of {kslab} (k-slab of the {c.mf}x{c.mf} MFMA) and of 32; got {c.bk}")
    if c.kr not in (2, 4, 8) or c.bk * c.bn != 8 * c.threads * c.kr:
        raise ValueError(f"bk*bn must be 8*{c.threads}*kr with kr in 2, 4, 8 (one transposed B vector per thread); got {c.bk}x{c.bn}")
    if (c.bm * c.bk // 8) % 64:
        raise ValueError("the A stage must split into whole waves of 16-byte loads")
    if c.lds_bytes > LDS_LIMIT[c.arch]:
        raise ValueError(f"LDS: {c.bm}x{c.bn}x{c.bk} double-buffered needs {c.lds_bytes} bytes; {c.arch} has {LDS_LIMIT[c.arch]}")
    if c.direct_a and (c.arch != "gfx950" or (c.bm * c.bk // 8) % c.threads):
        raise ValueError("direct_a (buffer_load ... lds) needs gfx950 and an A stage of whole 16-byte loads per thread")
    if c.group_m < 1 or c.chunk < 1:
        raise ValueError("group_m and chunk must be >= 1")
    return c


def _raise(msg):
    raise ValueError(msg)


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    # the same settings as tiles.core.lowering.template_env, so render_gemm and the IR lowering agree
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE_DIR), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    env.globals["raise"] = _raise
    return env


def _check_operand_flow(s: schedule.Schedule) -> None:
    """The template keeps one A register tile (ra) and two B tiles (rb0, rb1): every mma must find the A
    half it needs in ra and its B half already read in this iteration (or held from a read this iteration)."""
    held_a, held_b = None, set()
    for c in s.body:
        for st in c.steps:
            if st.kind == "lds_read" and st.operand == "A":
                held_a = st.half[0]
            elif st.kind == "lds_read" and st.operand == "B":
                held_b.add(st.half[0])
            elif st.kind == "mma":
                hm, hn = st.half
                if held_a != hm or hn not in held_b:
                    raise ValueError(f"{s.name}: {c.name} multiplies A{hm} x B{hn} but registers hold A{held_a}, B{sorted(held_b)}")


def render_gemm(arch: str, dtype_in: str = "bf16", dtype_out: str = "f32", name: str = "", **cfg) -> str:
    """HIP source of the GEMM kernel ``name`` (default tiles_gemm_<arch>_<in>_<out>), launched with
    ``GemmConfig.grid(M, N)`` workgroups of 512 threads and arguments (A, B, C, M, N, K, lda, ldb, ldc)."""
    c = gemm_config(arch, dtype_in, dtype_out, **cfg)
    s = c.schedule()
    schedule.check(s)
    _check_operand_flow(s)
    name = name or f"tiles_gemm_{arch}_{dtype_in}_{dtype_out}"
    return environment().get_template("gemm.hip.j2").render(
        cfg=c, schedule=s, schedule_text=s.describe(), name=name, template_version=TEMPLATE_VERSION)


# ----------------------------------------------------------------------------- 4-wave interleave
# One wave per SIMD (256 threads), the whole 512-register file per wave: 2x2 waves, each owning a
# (BM/2)x(BN/2) block of C as four (BM/4)x(BN/4) accumulators (one per A half x B half, like the ping-pong).
# Its main loop is schedule.interleave_gemm: one mixed cluster per K tile whose MFMAs, operand reads and
# global loads are interleaved by sched_group_barrier (schedule.interleave_pattern), then the LDS write.
INTERLEAVE_THREADS = 256
INTERLEAVE_DEFAULTS = {
    # bk 32 on both: with 256 threads a 256-wide B tile of bk 64 needs 8-row transposed writes (ds_write_b128),
    # which the bank model (layouts.choose_swizzle) does not cover
    "gfx950": dict(bm=256, bn=256, bk=32, mf=32, group_m=8, chunk=64),
    "gfx942": dict(bm=256, bn=256, bk=32, mf=32, group_m=8, chunk=64),
}


@dataclass(frozen=True)
class InterleaveConfig(GemmConfig):
    threads: int = INTERLEAVE_THREADS

    @property
    def mfma_per_acc(self) -> int:  # hardware MFMAs of one (BM/4)x(BN/4) accumulator per K tile
        kslab = layouts.Logical(self.mf).kslab
        return (self.bm // 4 // self.mf) * (self.bn // 4 // self.mf) * (self.bk // kslab) * self.mfma_per_logical

    @property
    def mfma_per_cluster(self) -> int:  # all four accumulators: the one mixed cluster
        return 4 * self.mfma_per_acc

    @property
    def ds_reads(self) -> int:  # ds_read_b128 per K tile: the four operand halves
        kslab = layouts.Logical(self.mf).kslab
        return 2 * (self.bm // 4 // self.mf + self.bn // 4 // self.mf) * (self.bk // kslab)

    @property
    def ds_reads_interleaved(self) -> int:
        """The reads the sched_group_barrier pattern spreads between MFMAs: those of the second A and B halves.
        The first MFMA needs A0 and B0 whole, so their reads lead (free of any group): a pattern that also
        spread them would contradict the data dependencies, and the scheduler then drops it altogether."""
        return self.ds_reads // 2

    def schedule(self) -> schedule.Schedule:
        return schedule.interleave_gemm(schedule.GemmShape(self.a_loads, self.b_loads), self.mfma_per_cluster,
                                        self.ds_reads_interleaved)

    def issue_order(self) -> List[List[tuple]]:
        """The mixed cluster's instructions in issue order, one group per entry of the schedule's pattern
        (the template puts a sched_barrier after each group, so the order is the source order). The MFMAs
        are inline asm with AGPR accumulators (arch.h mfma32_agpr), which sched_group_barrier cannot
        classify, so the interleave is spelled out here instead of left to the scheduler:
          ("mfma", h0, h1, i, j, s)      acc{h0}{h1}.d[i][j] += rb{h1}.c[i][s] . ra{h0}.c[j][s]  (one logical chunk)
          ("ds_read", "A"|"B", i, s)     chunk (i, s) of the second half ra1 / rb1 (one ds_read_b128)
          ("vmem", "A", p) / ("vmem", "B", p, q)   one buffer_load_dwordx4 of the next tile's stages
        A pattern group of n MFMAs issues logical chunks until n more hardware MFMAs are out (gfx942: two per
        chunk); an MFMA whose second-half operand is not read yet pulls that read forward (data first)."""
        kslab = layouts.Logical(self.mf).kslab
        ra, rb, kb = self.bm // 4 // self.mf, self.bn // 4 // self.mf, self.bk // kslab
        mfmas = [("mfma", h0, h1, i, j, s_) for h0 in (0, 1) for h1 in (0, 1)
                 for i in range(rb) for j in range(ra) for s_ in range(kb)]
        # B1 first: acc01 (A0 x B1) comes before acc10 (A1 x B0)
        reads = [("ds_read", "B", i, s_) for i in range(rb) for s_ in range(kb)] + \
                [("ds_read", "A", j, s_) for j in range(ra) for s_ in range(kb)]
        a_pass = -(-self.bm * self.bk // 8 // self.threads)
        vmem = [("vmem", "A", p) for p in range(a_pass)] + \
               [("vmem", "B", p, q) for p in range(self.bk * self.bn // 8 // self.kr // self.threads) for q in range(self.kr)]
        queues = {"mfma": mfmas, "ds_read": reads, "vmem_read": vmem}
        done = set()
        groups: List[List[tuple]] = []
        hw_target = hw_done = 0
        for kind, n in self.schedule().body[0].pattern:
            g: List[tuple] = []
            if kind == "mfma":
                hw_target += n
                while hw_done < hw_target and queues["mfma"]:
                    m = queues["mfma"].pop(0)
                    _, h0, h1, i, j, s_ = m
                    need = ([("ds_read", "B", i, s_)] if h1 else []) + ([("ds_read", "A", j, s_)] if h0 else [])
                    for r in need:
                        if r not in done:
                            queues["ds_read"].remove(r)
                            g.append(r)
                            done.add(r)
                    g.append(m)
                    hw_done += self.mfma_per_logical
            else:
                for _ in range(n):
                    if queues[kind]:
                        it = queues[kind].pop(0)
                        done.add(it)
                        g.append(it)
            if g:
                groups.append(g)
        leftover = [it for q in queues.values() for it in q]
        if leftover:  # cannot happen with interleave_pattern's totals; kept so nothing is ever dropped
            groups.append(leftover)
        return groups


def interleave_config(arch: str, dtype_in: str = "bf16", dtype_out: str = "f32", **cfg) -> InterleaveConfig:
    c = InterleaveConfig(arch, dtype_in, dtype_out,
                         **_options("interleave GEMM", arch, dtype_in, dtype_out, INTERLEAVE_DEFAULTS, cfg))
    kslab = layouts.Logical(c.mf).kslab
    if c.bm % (4 * c.mf) or c.bn % (4 * c.mf):
        raise ValueError(f"bm and bn must be multiples of {4 * c.mf} for mf={c.mf} (4 waves: 2x2 halves x 2x2 waves); got {c.bm}x{c.bn}")
    if c.bk % kslab or c.bk * 2 % 64:
        raise ValueError(f"bk must be a multiple of {kslab} (k-slab of the {c.mf}x{c.mf} MFMA) and of 32; got {c.bk}")
    if c.kr not in (2, 4) or c.bk * c.bn != 8 * c.threads * c.kr:
        raise ValueError(f"bk*bn must be 8*{c.threads}*kr with kr in 2, 4 (one transposed B vector per thread); got {c.bk}x{c.bn}")
    if (c.bm * c.bk // 8) % 64:
        raise ValueError("the A stage must split into whole waves of 16-byte loads")
    if c.lds_bytes > LDS_LIMIT[c.arch]:
        raise ValueError(f"LDS: {c.bm}x{c.bn}x{c.bk} double-buffered needs {c.lds_bytes} bytes; {c.arch} has {LDS_LIMIT[c.arch]}")
    if c.group_m < 1 or c.chunk < 1:
        raise ValueError("group_m and chunk must be >= 1")
    return c


def sched_groups(pattern):
    """(mask, count) per sched_group_barrier of an interleave pattern, in issue order."""
    return [(schedule.SCHED_MASK[kind], n) for kind, n in pattern]


def render_gemm_interleave(arch: str, dtype_in: str = "bf16", dtype_out: str = "f32", name: str = "", **cfg) -> str:
    """HIP source of the 4-wave interleave GEMM ``name``, launched with ``InterleaveConfig.grid(M, N)``
    workgroups of 256 threads and arguments (A, B, C, M, N, K, lda, ldb, ldc)."""
    c = interleave_config(arch, dtype_in, dtype_out, **cfg)
    s = c.schedule()
    schedule.check(s)
    name = name or f"tiles_gemm_interleave_{arch}_{dtype_in}_{dtype_out}"
    return environment().get_template("gemm_interleave.hip.j2").render(
        cfg=c, schedule=s, schedule_text=s.describe(), name=name, template_version=TEMPLATE_VERSION,
        sched_groups=sched_groups, issue_order=c.issue_order())
