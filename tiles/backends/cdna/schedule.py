"""CDNA schedules as data: 8-wave ping-pong and 4-wave interleave, the checks that keep them safe,
s_waitcnt accounting, and the chiplet-aware tile order.

A schedule is a list of *clusters* per loop iteration. Each cluster is a list of steps and ends with
``s_barrier`` (+ ``sched_barrier(0)``). The GEMM template renders the steps one to one, so the checker
below looks at exactly what the kernel executes.

8-wave ping-pong (HipKittens' GEMM / attention forward, see HARDWARE.md): two groups of 4 waves (one
wave of each group per SIMD). Before the loop group 1 executes one extra ``s_barrier``; since barriers
count all 8 waves, group 1 then runs cluster i while group 0 runs cluster i+1: while one group is in a
compute cluster (MFMA burst under ``s_setprio(1)``) the other is in a memory cluster. After the loop,
group 0 executes one extra barrier so both have executed the same number.

Safety of shared LDS buffers under the one-cluster skew: group g runs cluster i (0-based, counted over
the whole loop) in barrier epoch ``i + 1 + g`` (epoch 0 is the prologue). A read of LDS data must come in
a later epoch than every group's write of it, and a write must come in a later epoch than every group's
read of the previous contents; with a skew of one that means two clusters apart (``check_lds_hazards``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from . import layouts

# ----------------------------------------------------------------------------- s_waitcnt

VMCNT_MAX = 63  # gfx9: 6 bits
LGKMCNT_MAX = 15  # gfx9: 4 bits


def waitcnt_imm(arch: str, vm: int = VMCNT_MAX, exp: int = 7, lgkm: int = LGKMCNT_MAX) -> int:
    """The s_waitcnt immediate (gfx942 and gfx950 share the gfx9 encoding; arch.h's waitcnt_imm mirrors it):
    vmcnt bits [3:0] and [15:14], expcnt [6:4], lgkmcnt [11:8]."""
    if arch not in layouts.ARCHS:
        raise ValueError(f"unknown arch {arch!r}")
    if not (0 <= vm <= VMCNT_MAX and 0 <= exp <= 7 and 0 <= lgkm <= LGKMCNT_MAX):
        raise ValueError(f"waitcnt out of range: vm={vm} exp={exp} lgkm={lgkm}")
    return (vm & 0xF) | ((vm >> 4) << 14) | ((exp & 7) << 4) | ((lgkm & 0xF) << 8)


def waitcnt_for(loads_in_flight: Sequence, needed: Iterable, limit: int = VMCNT_MAX) -> Optional[int]:
    """The counter value N for ``s_waitcnt vmcnt(N)`` (or lgkmcnt) that guarantees every load in ``needed``
    has completed. ``loads_in_flight`` lists the outstanding loads of this wave, oldest first; they complete
    in issue order, so N is the number of loads issued after the newest needed one. Returns None when
    nothing needed is in flight (no wait). Clamped to the counter's range (waiting for more is safe)."""
    order = list(loads_in_flight)
    idx = [order.index(x) for x in needed if x in order]
    if not idx:
        return None
    return min(len(order) - 1 - max(idx), limit)


# ----------------------------------------------------------------------------- schedule data


@dataclass(frozen=True)
class Step:
    """One action of a cluster.

    kind: ``gload`` (global -> staging registers, ``n`` buffer loads of ``operand`` for the next tile),
    ``gload_lds`` (gfx950: ``n`` buffer loads straight into the next tile's LDS buffer; the data is there
    once a ``wait_vm`` retires them),
    ``lds_write`` (staging -> LDS buffer of the next tile), ``lds_read`` (LDS -> operand registers of half
    ``half`` of the current tile), ``mma`` (accumulator (hm, hn) = ``half``), ``wait_vm`` / ``wait_lgkm``
    (``n``), ``prio`` (``n``)."""

    kind: str
    operand: str = ""
    half: Tuple[int, ...] = ()
    n: int = 0

    def __str__(self):
        a = self.operand + ("".join(map(str, self.half)) if self.half else "")
        num = str(self.n) if (self.n or self.kind in ("wait_vm", "wait_lgkm", "prio")) else ""
        return f"{self.kind}({a}{',' if a and num else ''}{num})"


@dataclass(frozen=True)
class Cluster:
    name: str
    kind: str  # memory | compute | mixed
    steps: Tuple[Step, ...]
    pattern: Tuple[Tuple[str, int], ...] = ()  # sched_group_barrier order (interleave), empty = free


@dataclass(frozen=True)
class Schedule:
    name: str
    groups: int  # wave groups (2: ping-pong, 1: interleave)
    waves_per_group: int
    prologue: Tuple[Step, ...]  # run by every wave, then one barrier
    body: Tuple[Cluster, ...]  # one loop iteration (one K tile); each cluster ends with a barrier
    lead_extra: Dict[int, int] = field(default_factory=dict)  # group -> extra barriers before the loop
    trail_extra: Dict[int, int] = field(default_factory=dict)  # group -> extra barriers after the loop
    loads: Dict[str, int] = field(default_factory=dict)  # buffer loads per thread per tile, by operand
    stages: int = 2  # LDS buffers: tile t lives in buffer t % stages

    @property
    def threads(self) -> int:
        return 64 * self.waves_per_group * self.groups

    def describe(self) -> str:
        out = [f"{self.name}: {self.groups} group(s) x {self.waves_per_group} waves"]
        out.append("  prologue: " + " ".join(map(str, self.prologue)) + " | barrier")
        for g, n in self.lead_extra.items():
            out.append(f"  group {g}: {n} extra barrier(s) before the loop")
        for c in self.body:
            out.append(f"  {c.name:3} [{c.kind:7}] " + " ".join(map(str, c.steps)) + " | barrier")
        for g, n in self.trail_extra.items():
            out.append(f"  group {g}: {n} extra barrier(s) after the loop")
        return "\n".join(out)


# ----------------------------------------------------------------------------- builders


@dataclass(frozen=True)
class GemmShape:
    """Per-thread load counts of one K tile (what the schedule needs to know of the GEMM config)."""

    a_loads: int  # buffer_load_dwordx4 per thread for the A stage
    b_loads: int  # for the B stage
    direct_a: bool = False  # gfx950: A goes global -> LDS directly (buffer_load ... lds)


def _vm_waits(order: List[str], needed_prefix: str) -> int:
    n = waitcnt_for(order, [x for x in order if x.startswith(needed_prefix)])
    return 0 if n is None else n


def pingpong_gemm(shape: GemmShape) -> Schedule:
    """8-wave ping-pong for the GEMM main loop (one K tile per iteration, LDS double buffer).

    memory clusters M0..M3 alternate with compute clusters C0..C3 (accumulators (0,0), (0,1), (1,0), (1,1)).
    Tile t+1 is fetched into staging registers in M0 (A) and M1 (B) and written to the other LDS buffer in
    M2 and M3; the operand reads of tile t+1 start at the next iteration's M0, two clusters later."""
    a, b = shape.a_loads, shape.b_loads
    inflight = [f"A{i}" for i in range(a)] + [f"B{i}" for i in range(b)]
    wait_a = _vm_waits(inflight, "A")  # B loads may stay in flight while A is written
    wait_b = _vm_waits(inflight, "B")
    S = Step
    # with direct A loads the LDS write *is* the load; M2 only waits for it (the barrier publishes it)
    a_load = S("gload_lds", "A", n=a) if shape.direct_a else S("gload", "A", n=a)
    a_write = (S("wait_vm", n=wait_a),) if shape.direct_a else (S("wait_vm", n=wait_a), S("lds_write", "A"), S("wait_lgkm", n=0))
    body = (
        Cluster("M0", "memory", (S("lds_read", "A", (0,)), S("lds_read", "B", (0,)), a_load)),
        Cluster("C0", "compute", (S("prio", n=1), S("mma", "", (0, 0)), S("prio", n=0))),
        Cluster("M1", "memory", (S("lds_read", "B", (1,)), S("gload", "B", n=b))),
        Cluster("C1", "compute", (S("prio", n=1), S("mma", "", (0, 1)), S("prio", n=0))),
        Cluster("M2", "memory", (S("lds_read", "A", (1,)),) + a_write),
        Cluster("C2", "compute", (S("prio", n=1), S("mma", "", (1, 0)), S("prio", n=0))),
        Cluster("M3", "memory", (S("wait_vm", n=wait_b), S("lds_write", "B"), S("wait_lgkm", n=0))),
        Cluster("C3", "compute", (S("prio", n=1), S("mma", "", (1, 1)), S("prio", n=0))),
    )
    if shape.direct_a:
        prologue = (S("gload_lds", "A", n=a), S("gload", "B", n=b), S("wait_vm", n=0), S("lds_write", "B"), S("wait_lgkm", n=0))
    else:
        prologue = (S("gload", "A", n=a), S("gload", "B", n=b), S("wait_vm", n=0), S("lds_write", "A"), S("lds_write", "B"),
                    S("wait_lgkm", n=0))
    return Schedule("pingpong8", 2, 4, prologue, body, {1: 1}, {0: 1}, {"A": a, "B": b})


def interleave_pattern(n_mfma: int, others: Dict[str, int]) -> Tuple[Tuple[str, int], ...]:
    """4-wave interleave: spread the other instructions (ds_read, valu, vmem_read ...) evenly between
    single MFMAs, as ``sched_group_barrier`` groups [(kind, count), ...] in issue order."""
    if n_mfma <= 0:
        raise ValueError("interleave needs at least one MFMA")
    left = dict(others)
    out: List[Tuple[str, int]] = []
    for i in range(n_mfma):
        out.append(("mfma", 1))
        for kind, total in others.items():
            # cumulative share after MFMA i, rounded up, minus what was already placed
            want = -(-total * (i + 1) // n_mfma) - (total - left[kind])
            if want > 0:
                out.append((kind, want))
                left[kind] -= want
    merged: List[Tuple[str, int]] = []
    for kind, n in out:  # MFMAs with nothing between them form one group
        if merged and merged[-1][0] == kind:
            merged[-1] = (kind, merged[-1][1] + n)
        else:
            merged.append((kind, n))
    return tuple(merged)


SCHED_MASK = {"mfma": 0x8, "valu": 0x2, "salu": 0x4, "vmem_read": 0x20, "vmem_write": 0x40, "ds": 0x80,
              "ds_read": 0x100, "ds_write": 0x200, "trans": 0x400}


def interleave_gemm(shape: GemmShape, n_mfma: int, n_ds_read: int) -> Schedule:
    """4-wave interleave (one wave per SIMD, 512 registers each): one cluster per K tile in which MFMAs,
    the operand reads of the next half and the global loads of the next tile are interleaved one by one."""
    a, b = shape.a_loads, shape.b_loads
    S = Step
    pat = interleave_pattern(n_mfma, {"ds_read": n_ds_read, "vmem_read": a + b})
    body = (
        Cluster("I0", "mixed", (S("lds_read", "A", (0,)), S("lds_read", "B", (0,)), S("lds_read", "A", (1,)), S("lds_read", "B", (1,)),
                                S("gload", "A", n=a), S("gload", "B", n=b),
                                S("mma", "", (0, 0)), S("mma", "", (0, 1)), S("mma", "", (1, 0)), S("mma", "", (1, 1))), pat),
        Cluster("W0", "memory", (S("wait_vm", n=0), S("lds_write", "A"), S("lds_write", "B"), S("wait_lgkm", n=0))),
    )
    prologue = (S("gload", "A", n=a), S("gload", "B", n=b), S("wait_vm", n=0), S("lds_write", "A"), S("lds_write", "B"),
                S("wait_lgkm", n=0))
    return Schedule("interleave4", 1, 4, prologue, body, {}, {}, {"A": a, "B": b})


# ----------------------------------------------------------------------------- checks


def barrier_counts(s: Schedule, iters: int) -> Dict[int, int]:
    """s_barrier executed by each wave group over a loop of ``iters`` iterations."""
    return {g: 1 + s.lead_extra.get(g, 0) + iters * len(s.body) + s.trail_extra.get(g, 0) for g in range(s.groups)}


def check_balanced(s: Schedule, iters: Iterable[int] = (1, 2, 3, 8)) -> None:
    for n in iters:
        c = barrier_counts(s, n)
        if len(set(c.values())) != 1:
            raise AssertionError(f"{s.name}: unbalanced barriers after {n} iterations: {c}")
    if s.groups == 2:
        if s.lead_extra.get(1, 0) - s.lead_extra.get(0, 0) != 1:
            raise AssertionError(f"{s.name}: group 1 must lead by exactly one barrier")
        kinds = [c.kind for c in s.body]
        if any(a == b for a, b in zip(kinds, kinds[1:] + kinds[:1])):
            raise AssertionError(f"{s.name}: memory and compute clusters must alternate: {kinds}")
        for c in s.body:
            if c.kind == "compute":
                st = [x.kind for x in c.steps]
                if st[0] != "prio" or c.steps[0].n != 1 or st[-1] != "prio" or c.steps[-1].n != 0:
                    raise AssertionError(f"{s.name}: compute cluster {c.name} must run under s_setprio(1)")


def _events(s: Schedule, iters: int):
    """LDS accesses as (group, epoch, kind, operand, tile, buffer, cluster) with kind 'r' (read),
    'w' (data published: register writes at their cluster, direct loads at the wait that retires them)
    and 'i' (a write may start: the issue of a register write or of a direct load)."""
    ev = []
    for g in range(s.groups):
        lead = s.lead_extra.get(g, 0)
        inflight: List[Tuple[str, int]] = []  # (operand, tile) of direct loads, oldest first, one per load
        clusters = [("prologue", s.prologue, 0, -1)]
        i = 0
        for t in range(iters):
            for c in s.body:
                clusters.append((c.name, c.steps, i + 1 + lead, t))
                i += 1
        for name, steps, epoch, t in clusters:
            tile = t + 1  # loads and writes in iteration t are for tile t+1 (prologue: tile 0)
            for st in steps:
                if st.kind == "lds_read":
                    ev.append((g, epoch, "r", st.operand, t, t % s.stages, name))
                elif st.kind == "lds_write":
                    ev.append((g, epoch, "i", st.operand, tile, tile % s.stages, name))
                    ev.append((g, epoch, "w", st.operand, tile, tile % s.stages, name))
                elif st.kind == "gload_lds":
                    ev.append((g, epoch, "i", st.operand, tile, tile % s.stages, name))
                    inflight += [(st.operand, tile)] * st.n
                elif st.kind == "gload":
                    inflight += [("", tile)] * st.n  # register loads count in vmcnt too
                elif st.kind == "wait_vm":
                    keep = inflight[len(inflight) - st.n:] if st.n else []
                    for op, tl in inflight[:len(inflight) - len(keep)]:
                        if op:
                            ev.append((g, epoch, "w", op, tl, tl % s.stages, name))
                    inflight = keep
    return sorted(set(ev), key=lambda e: (e[1], e[0]))


def check_lds_hazards(s: Schedule, iters: int = 4) -> None:
    """Read-after-write and write-after-read safety of the LDS double buffer across wave groups: a read
    comes in a later epoch than every group's publication of that tile, and a write may only start in a
    later epoch than every group's last read of the buffer's previous tile."""
    ev = _events(s, iters)
    pub = [e for e in ev if e[2] == "w"]
    start = [e for e in ev if e[2] == "i"]
    reads = [e for e in ev if e[2] == "r"]
    for (g, ep, _, op, tile, buf, cl) in reads:
        ws = [w for w in pub if w[3] == op and w[4] == tile]
        if len({w[0] for w in ws}) != s.groups:
            raise AssertionError(f"{s.name}: group {g} reads {op}{tile} in {cl} but not every group's part of it is ever published")
        for (g2, ep2, _, _, _, _, cl2) in ws:
            if not ep > ep2:
                raise AssertionError(f"{s.name}: group {g} reads {op}{tile} in {cl} (epoch {ep}) before group {g2}'s part is published in {cl2} (epoch {ep2})")
    for (g, ep, _, op, tile, buf, cl) in start:
        for (g2, ep2, _, op2, tile2, buf2, cl2) in reads:
            if op2 == op and buf2 == buf and tile2 < tile and not ep > ep2:
                raise AssertionError(f"{s.name}: group {g} overwrites {op} buffer {buf} in {cl} (epoch {ep}) while group {g2} reads tile {tile2} in {cl2} (epoch {ep2})")
    # every cluster that writes LDS from registers waits for its writes before the barrier publishes them
    for c in s.body:
        kinds = [x.kind for x in c.steps]
        if "lds_write" in kinds:
            after = c.steps[kinds.index("lds_write"):]
            if not any(x.kind == "wait_lgkm" and x.n == 0 for x in after):
                raise AssertionError(f"{s.name}: {c.name} writes LDS without lgkmcnt(0) before its barrier")


def check_vm_waits(s: Schedule) -> None:
    """Every wait_vm before an lds_write equals waitcnt_for(the loads in flight, that operand's loads),
    simulated over two iterations of the steady state (loads of one tile stay in flight across clusters)."""
    inflight: List[str] = []
    seq = list(s.prologue) + [st for _ in range(2) for c in s.body for st in c.steps]
    pending_wait = None
    for st in seq:
        if st.kind in ("gload", "gload_lds"):
            inflight += [f"{st.operand}{i}" for i in range(st.n)]
        elif st.kind == "wait_vm":
            pending_wait = st.n
            inflight = inflight[len(inflight) - st.n:] if st.n < len(inflight) else inflight
        elif st.kind == "lds_write":
            need = [x for x in inflight if x.startswith(st.operand)]
            if need:
                raise AssertionError(f"{s.name}: lds_write {st.operand} while its loads {need} may be in flight (wait was {pending_wait})")


def check_interleave(c: Cluster) -> None:
    """The sched_group_barrier pattern issues exactly the cluster's instructions and never two MFMAs'
    worth of other work back to back without an MFMA between them."""
    totals: Dict[str, int] = {}
    for kind, n in c.pattern:
        totals[kind] = totals.get(kind, 0) + n
    kinds = [k for k, _ in c.pattern]
    if kinds and kinds[0] != "mfma":
        raise AssertionError(f"{c.name}: interleave must start with an MFMA")
    for a, b in zip(kinds, kinds[1:]):
        if a == b:
            raise AssertionError(f"{c.name}: two {a} groups in a row")
    if any(v <= 0 for v in totals.values()):
        raise AssertionError(f"{c.name}: empty group")


def check(s: Schedule) -> None:
    check_balanced(s)
    check_lds_hazards(s)
    check_vm_waits(s)
    for c in s.body:
        if c.pattern:
            check_interleave(c)


# ----------------------------------------------------------------------------- chiplet-aware tile order

NUM_XCDS = 8


def chiplet_remap(wg: int, num_wg: int, num_xcds: int = NUM_XCDS, chunk: int = 64) -> int:
    """Hardware workgroup id -> logical id so that logical ids [x*chunk, (x+1)*chunk) of each block of
    num_xcds*chunk run on XCD x (hardware dispatches id to XCD id % num_xcds). Same math as grid.h."""
    block = num_xcds * chunk
    limit = (num_wg // block) * block
    if num_xcds <= 1 or wg >= limit:
        return wg
    xcd, local = wg % num_xcds, wg // num_xcds
    return (local // chunk) * block + xcd * chunk + local % chunk


def grouped_tile(i: int, tiles_m: int, tiles_n: int, group_m: int) -> Tuple[int, int]:
    """Logical id -> (tile row, tile col), walking windows of group_m tile rows column by column."""
    per_group = group_m * tiles_n
    group = i // per_group
    first_m = group * group_m
    rows = min(tiles_m - first_m, group_m)
    inner = i % per_group
    return first_m + inner % rows, inner // rows


def tile_order(tiles_m: int, tiles_n: int, num_xcds: int = NUM_XCDS, chunk: int = 64, group_m: int = 8) -> List[Tuple[int, int]]:
    """(tile row, tile col) computed by each hardware workgroup id."""
    n = tiles_m * tiles_n
    return [grouped_tile(chiplet_remap(w, n, num_xcds, chunk), tiles_m, tiles_n, group_m) for w in range(n)]


def is_permutation(order: Sequence[Tuple[int, int]], tiles_m: int, tiles_n: int) -> bool:
    return sorted(order) == [(m, n) for m in range(tiles_m) for n in range(tiles_n)]


def xcd_footprint(order: Sequence[Tuple[int, int]], num_xcds: int = NUM_XCDS, resident: int = 32) -> float:
    """Mean number of distinct A-row + B-column tiles each XCD touches among the first ``resident``
    workgroups dispatched to it (a proxy for its L2 working set; lower is better)."""
    per: Dict[int, List[Tuple[int, int]]] = {}
    for w, mn in enumerate(order):
        per.setdefault(w % num_xcds, []).append(mn)
    tot = 0
    for lst in per.values():
        first = lst[:resident]
        tot += len({m for m, _ in first}) + len({n for _, n in first})
    return tot / max(1, len(per))
