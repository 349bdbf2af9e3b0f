"""IR → Hopper CUDA C++ for kernels whose main loop streams tiles through shared memory into wgmma:
the attention kernels (tiles/kernels/attention.py), lowered op by op onto a warp-specialized schedule.

The schedule (templates/attention.cu.j2) comes from the kernel's overlap pattern:

* a PRODUCER warpgroup (one thread issues, the rest give their registers away with setmaxnreg) walks
  the kernel's loop nest keeping only the `load_async` ops: each one in the pipelined loop becomes a
  TMA load into a stage of an mbarrier ring (one stage per iteration holds every tile the iteration
  loads); a `load_async` outside any loop becomes a one-shot TMA load on its own barrier;
* CONSUMER warpgroups walk the same loop nest with every other op, each a call into ops.h:
  `wait` → wait on the stage's (or one-shot) full barrier; `mma` → wgmma (A from shared memory or
  from registers, B K-major when `tb`, else MN-major), issued asynchronously and waited for lazily,
  right before the first op that touches its accumulator or its register operand; the ring stage is
  released (every consumer thread arrives) once the wgmmas that read it retired;
* every register tile / row vector whose rows are BM (the rows of the first mma's accumulator) is
  split over the consumer warpgroups, each owning BM / consumers consecutive rows; row coordinates of
  masks, loads and stores on those tiles are offset by the warpgroup's first row. Row-wise ops keep
  that split legal; column reductions would not, and are refused;
* wgmma reads a register A operand only untransposed, so a register tile used as `mma(..., ta=True)`'s
  A operand is HELD TRANSPOSED, and with it every tile an elementwise, mask or broadcast op connects to
  it (`orient`): attention_bwd_dkdv keeps Sᵀ, Pᵀ, dPᵀ, dSᵀ with the keys as rows (FlashAttention-3's
  swapped backward), an mma producing such a tile swaps its operands (Sᵀ = K Qᵀ), masks swap axes,
  and the row vectors it broadcasts (LSE, Delta) become column vectors (ops.h `cv`: lane l of each
  warp keeps columns l, l + 32, ...; a broadcast is two shuffles per 8 columns). BM above is then the
  rows as held: the keys;
* PingPong(stages) uses two consumer warpgroups that take turns on the tensor cores with two named
  barriers: a warpgroup's GEMM phase (the loop body's last mma, then the next iteration's first)
  starts only after the other warpgroup issued its own, so one softmax runs under the other's GEMMs.
  Pipelined / ProducerConsumer use the same code without the turn-taking, and so does Interleave,
  which requires the rotated loop (`rotate`: each warpgroup's last mma under its own softmax);
* the schedule choices the IR leaves to the backend (rotate, hoist, fold, ring_store, ...) are planned
  in attention_plans.py, and the options a problem launches with in attention_launch.py;
  bench/hopper_notes.md has the measurements behind each default.

Scalars (program ids, sizes, strides, loop bounds, mask offsets) are the IR's own expressions rendered
by `Lowering.expr`. Global tensors are read through rank-4 TMA maps (any row/head strides that TMA
accepts) and written with bounded stores from registers (rows past the tensor's extent are dropped).
"""
from __future__ import annotations

import math
import re
from typing import Dict, List, Optional, Tuple

from tiles.core import ir
from tiles.core.lowering import Lowered, Lowering, LoweringError, header_files
from tiles.core.patterns import Interleave, PingPong, ProducerConsumer

from . import gemm_probe, runtime
from .attention_launch import ARCH, AttentionLaunch
from .attention_plans import CTYPE, WINDOW_MB, SchedulePlans, tiles_of

SMEM_LIMIT = gemm_probe.SMEM_LIMIT
RESERVED = {"S", "pos", "cw", "wg_row0", "held", "held_phase", "out_stage", "staged", "pid0", "pid1", "pid2",
            "smem_raw", "alloc", "map", "min", "max",
            "prog", "it", "programs", "grid0", "grid1", "grid2", "release", "heads", "window", "w0", "in_w",
            "slot", "done", "pair", "n_pairs", "per_head", "w_at", "level", "head", "streamed",
            # C++ keywords a tile name could collide with (attention's `do` tile)
            "do", "for", "if", "else", "while", "int", "float", "double", "char", "long", "short", "auto", "case",
            "const", "new", "delete", "this", "switch", "return", "break", "continue", "default", "static",
            "struct", "class", "union", "template", "typename", "using", "namespace", "register", "volatile",
            "operator", "private", "public", "protected", "friend", "virtual", "goto", "try", "catch", "throw",
            "signed", "unsigned", "void", "bool", "true", "false", "enum", "extern", "inline", "sizeof", "asm"}
CMP = {"==", "!=", "<", "<=", ">", ">="}


class _Group:
    """One committed wgmma group still in flight: the accumulator it writes, the register tile it
    reads, which ring stage its shared operands sit in ("cur": this iteration's, "held": the
    stage kept from the previous iteration, None: no ring tile), and its shared operands."""

    def __init__(self, acc: ir.Tile, a_reg: Optional[ir.Tile], stage: Optional[str], reads=()):
        self.acc, self.a_reg, self.stage, self.reads = acc, a_reg, stage, list(reads)

    def touches(self, tiles) -> bool:
        return any(t is self.acc or t is self.a_reg for t in tiles)

class WarpSpecializedLowering(SchedulePlans, AttentionLaunch, Lowering):
    backend = "hopper"
    template_dir = str(gemm_probe.TEMPLATES)
    int_call = {"min": "int_min({a}, {b})", "max": "int_max({a}, {b})", "cdiv": "ceil_div({a}, {b})"}
    reads_tensors = True  # each program reads its own sizes from a tensor (k.read: ragged key lengths)
    stopped_windows = True  # shared tiles zeroed past a stop (zero_past_stops, zero_past_stop_once); stores bounded

    def __init__(self, kernel: ir.Kernel, arch: Optional[str] = None, **options):
        super().__init__(kernel, arch or ARCH)
        self.split = None  # option split_tail's plan (plan_split)
        if self.arch != ARCH:
            raise LoweringError(f"hopper: wgmma and setmaxnreg need arch {ARCH!r}, got {self.arch!r}")
        self.options = options

    def _fail(self, why: str, node=None):
        at = f" (at {node.loc})" if node is not None and getattr(node, "loc", None) else ""
        raise LoweringError(f"hopper: kernel {self.k.name!r}: {why}{at}")

    # ------------------------------------------------------------------ names and expressions
    def sym_name(self, s: ir.Sym) -> str:
        return s.name.replace(".", "_")

    def expr(self, e, names: Optional[Dict[str, str]] = None) -> str:
        """C++ of an IR expression; `names` spells some symbols otherwise (a program id at a given value)."""
        e = ir.as_expr(e)

        def call(op, a, b):
            if op == "//":
                return "/"  # operands here are non-negative sizes and indices
            return self.int_call[op].format(a=a, b=b)

        name = self.sym_name if not names else (lambda s: names.get(s.name, self.sym_name(s)))
        return ir.render(e, name, call, read=lambda r: self.read_text(r, lambda x: self.expr(x, names)),
                         declared=self.declared)

    def fexpr(self, e) -> str:
        """A float operand: literals get an f suffix so the arithmetic stays in fp32."""
        e = ir.as_expr(e)
        if isinstance(e, ir.Const):
            v = float(e.value)
            if math.isinf(v):
                return "INFINITY" if v > 0 else "-INFINITY"
            return f"{v!r}f"
        if isinstance(e, ir.Sym):
            return self.sym_name(e) if e.is_float else f"float({self.sym_name(e)})"
        if isinstance(e, ir.Bin) and e.op in ("+", "-", "*", "/"):
            return f"({self.fexpr(e.a)} {e.op} {self.fexpr(e.b)})"
        return f"float({self.expr(e)})"

    def var(self, t: ir.Tile, stage: str = "pos.stage") -> str:
        name = t.name + "_" if t.name in RESERVED else t.name
        if t.kind == "shared":
            if t in self.ring:
                return f"S.{name}[{stage}]"
            return f"S.{name}[dsb]" if self.ds_stages == 2 and t in self.written else f"S.{name}"
        return name

    # ------------------------------------------------------------------ analysis
    def analyse(self) -> None:
        k = self.k
        p = k.pattern
        # Interleave: each consumer warpgroup overlaps its own async wgmmas with its vector work (the
        # rotated loop, FA3's intra-warpgroup overlap), side by side with the others, without turns
        self.interleave = isinstance(p, Interleave)
        self.pingpong = isinstance(p, PingPong)
        self.stages = p.stages
        mmas = [n for n in k.walk() if isinstance(n, ir.Op) and n.name == "mma"]
        if not mmas:
            self._fail("has no mma: nothing for the wgmma consumers to do")
        if isinstance(p, ProducerConsumer):
            self.consumers = p.consumers
        else:  # a consumer warpgroup per 64 rows where the tile has 128 or 192, else one
            self.orient()  # (the split rows are those of the first accumulator as held)
            rows = self.stored(mmas[0].outs[0])[0]
            self.consumers = rows // 64 if rows in (128, 192) else (2 if rows % 128 == 0 else 1)
        # launch-time overrides (benchmark variants): stages, consumers, pingpong
        known = {"stages", "consumers", "pingpong", "rotate", "hoist", "persistent", "order", "fold", "early_release",
                 "window", "continuous_turns", "uniform_warpgroup", "tree_max", "prefetch", "ds_stages",
                 "reducer", "whole_tile_stores", "peel", "wide_stores", "tma_store",
                 "stmatrix", "vec_tma", "resident", "quad_sums", "split_tail", "ring_store", "kv_rings", "reverse"}
        unknown = set(self.options) - known
        if unknown:
            self._fail(f"unknown options {sorted(unknown)} (known: {sorted(known)})")
        # pairs of a row a global store from registers (ops.h store_wide). 2 (8 bytes, whole sectors)
        # over one pair a store: forward 1.01-1.19x at D = 128, dK/dV 0.98-1.23x, most at short
        # sequences, where each program stores its tile after few key blocks; 4 (16 bytes) within 1 %
        # of 2 (H200, session 17)
        self.wide_stores = int(self.options.get("wide_stores", 2))
        if self.wide_stores not in (0, 2, 4):
            self._fail(f"option wide_stores={self.options['wide_stores']!r}: 0 (a pair a store), 2 or 4 pairs a store")
        self.persistent = bool(self.options.get("persistent", True))
        # +0.8 to +4.2 % at all 12 forward shapes on the H200 (session 16, bench/hopper_notes.md)
        self.tree_max = bool(self.options.get("tree_max", True))
        # persistent CTAs take programs round-robin; when the main loop's trip count depends on a
        # program id (causal), walk program 0 slowest and in reverse, so every round holds blocks
        # of about the same work, largest first. Otherwise program 0 fastest: CTAs running together
        # share K/V in L2.
        loop = k.main_loop()
        varying = loop is not None and any(x.kind == "pid" for e in (loop.start, loop.stop) for x in ir.symbols(e))
        self.order = self.options.get("order", "heavy_first" if varying else "pid0_fastest")
        # programs are walked with program 0 in reverse unless the low program ids are the heavy ones
        # (the forward's last query blocks see the most keys; dK/dV's first key blocks see the most queries)
        # (the launcher walks a grid over a table of packed sequences' blocks in order: the table comes
        # heaviest first)
        self.reverse = bool(self.options.get("reverse", not varying or self._trips(loop, 0) <= self._trips(loop, -1)))
        self.stages = int(self.options.get("stages", self.stages))
        self.consumers = int(self.options.get("consumers", self.consumers))
        # PingPong's turn-taking is written for two warpgroups; three run side by side
        self.pingpong = bool(self.options.get("pingpong", self.pingpong and self.consumers == 2))
        loop = k.main_loop()
        if loop is None:
            self._fail("needs a k.pipeline loop (the loop whose load_async ops the producer streams)")
        self.loop = loop
        self.orient()
        # the rows every register tile holds (as stored) and the consumer warpgroups split
        self.BM = self.stored(mmas[0].outs[0])[0]
        if self.BM % (64 * self.consumers):
            self._fail(f"BM={self.BM} does not split into {self.consumers} consumer warpgroups of 64-row slices")
        self.WG_ROWS = self.BM // self.consumers
        # an mma of two shared tiles whose product has neither the rows nor the columns the warpgroups
        # split but sums over them (the fused backward's dQ = dS K at D = 64: 64 queries x 64 over the
        # 128 keys), read only by store_adds and scalar muls: each warpgroup sums its own slice of
        # them (mma_AtB_slice) and adds its partial product into global memory
        self.split_k = set()
        for n in mmas:
            acc, a, b = n.outs[0], n.ins[0], n.ins[1]
            if acc in self.flipped or self.stored(acc)[0] == self.BM or acc.rows % 64:
                continue
            uses = [x for x in k.walk() if isinstance(x, ir.Op) and x is not n and acc in tiles_of(x)]
            linear = all(x.name == "store_add" or (x.name == "mul" and x.outs[0] is acc and x.ins[0] is acc
                                                   and not isinstance(x.ins[1], ir.Tile)) for x in uses)
            kdim = a.rows if n.attrs.get("ta", False) else a.cols
            if a.kind == b.kind == "shared" and kdim == self.BM and linear:
                self.split_k.add(acc)
        for t in k.tiles:
            if t.kind == "vec" and t.axis != "row":
                self._fail(f"column vector {t.name}: the row split over warpgroups keeps only row vectors")
            if t.kind == "vec" and t in self.flipped:
                if t.rows % 8:
                    self._fail(f"vector {t.name} runs along the columns of transposed tiles: its length must be "
                               f"a multiple of 8, got {t.rows}")
                continue
            if t.kind in ("reg", "vec") and self.stored(t)[0] != self.BM and t not in self.split_k:
                how = " (held transposed)" if t in self.flipped else ""
                self._fail(f"register tile {t.name}{how} has {self.stored(t)[0]} rows; every register tile must "
                           f"have the {self.BM} rows the consumer warpgroups split")
            if t.kind == "reg" and t.dtype.name not in CTYPE:
                self._fail(f"register tile {t.name}: dtype {t.dtype} not supported")
        for n in k.walk():
            if isinstance(n, ir.Op) and n.name in ("col_max", "col_sum") or (
                    isinstance(n, ir.Op) and n.name.endswith("_col") and n.name != "mask_cols"):
                self._fail(f"{n.name} reduces or broadcasts along columns, across the rows the consumer "
                           "warpgroups split", n)
        # loads: ring tiles (in the pipelined loop) and one-shot tiles (top level)
        self.ring: List[ir.Tile] = []
        self.once: List[ir.Op] = []
        self.tokens: Dict[str, Tuple[str, object]] = {}
        loop_loads = [n for n in loop.body if isinstance(n, ir.Op) and n.name == "load_async"]
        waits = [n for n in loop.body if isinstance(n, ir.Op) and n.name == "wait"]
        if len(waits) != 1 or set(waits[0].attrs["tokens"]) != {o.attrs["token"] for o in loop_loads}:
            self._fail("the pipelined loop must wait once on all of its load_async tokens (one ring stage "
                       "per iteration)")
        for o in loop_loads:
            self.ring.append(o.outs[0])
            self.tokens[o.attrs["token"]] = ("ring", None)
        for n in k.body:
            if isinstance(n, ir.Op) and n.name == "load_async":
                self.tokens[n.attrs["token"]] = ("once", len(self.once))
                self.once.append(n)
        for n in k.walk():
            if isinstance(n, ir.Op) and n.name == "load_async" and n.attrs["token"] not in self.tokens:
                self._fail("load_async is only lowered in the pipelined loop or outside every loop", n)
        for t in k.tiles:
            if t.kind == "shared" and (t.dtype.name not in ("bf16", "f16") or self.stored(t)[1] % 64):
                self._fail(f"shared tile {t.name} must be bf16/f16 with a multiple of 64 columns "
                           "(128-byte swizzled TMA boxes)")
        # TMA maps: one per (param, box rows)
        self.maps: Dict[Tuple[int, int], str] = {}
        for o in [n for n in k.walk() if isinstance(n, ir.Op) and n.name == "load_async"]:
            view, t = o.ins[0], o.outs[0]
            P = view.param
            if P.rank > 4 or view.rank != 2 or view.kept[1] != P.rank - 1:
                self._fail(f"load_async of {view.text()}: TMA reads 2-D windows whose columns are the last axis", o)
            if t.rows > 256:
                self._fail(f"shared tile {t.name}: a TMA box has at most 256 rows", o)
            key = (id(P), t.rows)
            if key not in self.maps:
                same = [v for (pid, _), v in self.maps.items() if pid == id(P)]
                self.maps[key] = f"map_{P.name}" + (f"_{t.rows}" if same else "")
        self.map_info = {}
        for o in [n for n in k.walk() if isinstance(n, ir.Op) and n.name == "load_async"]:
            P, t = o.ins[0].param, o.outs[0]
            self.map_info[self.maps[(id(P), t.rows)]] = (P, t.rows, o.ins[0].kept[0])
        self.plan_vec_tma()
        # store_add of a tile held transposed: staged in shared memory in the logical orientation, one
        # f32 tile per consumer warpgroup (its columns of the logical tile), and added by a TMA reduce
        self.reduces: Dict[int, str] = {}
        for o in [n for n in k.walk() if isinstance(n, ir.Op) and n.name == "store_add"
                  and (n.ins[0] in self.flipped or n.ins[0] in self.split_k)]:
            t, view = o.ins
            P = view.param
            if P.rank > 4 or view.rank != 2 or view.kept[1] != P.rank - 1:
                self._fail(f"store_add to {view.text()}: TMA adds 2-D windows whose columns are the last axis", o)
            if t.rows % 8 or t.rows > 256:
                self._fail(f"store_add of {t.name}: a TMA box takes a multiple of 8 rows, at most 256; got {t.rows}", o)
            self._write_map(o, t.rows, f"store_add to {P.name}, which the kernel also loads")
            self.reduces[id(o)] = f"{t.name}_red"
        red_bytes = sum(self.consumers * o.ins[0].rows * self._staged_cols(o.ins[0]) * 4 for o in k.walk()
                        if isinstance(o, ir.Op) and id(o) in self.reduces)
        # option tma_store: a 16-bit register tile stored to global memory outside the pipelined loop
        # goes through a swizzled staging tile per consumer warpgroup and a TMA store, which drops the
        # rows past the tensor (no bounds test a pair) and lets the warpgroup move on while it drains
        self.tma_stores: Dict[int, str] = {}
        self.ring_stores: Dict[int, Tuple[ir.Tile, str]] = {}  # option ring_store (plan_ring_store)
        if self.options.get("tma_store", False):
            if self.reduces:
                self._fail("option tma_store: the staging tiles' named barriers are the TMA reduces' (4 + cw)")
            loop_ops = {id(x) for x in k.walk([self.loop])}
            for o in [n for n in k.walk() if isinstance(n, ir.Op) and n.name == "store" and id(n) not in loop_ops]:
                t, view = o.ins
                P = view.param
                if (t.kind != "reg" or t in self.flipped or view.rank != 2 or view.kept[1] != P.rank - 1
                        or P.rank > 4 or P.dtype.name not in ("bf16", "f16") or t.cols % 64 or view.stops):
                    continue  # stored from registers, as without the option (a box would cross a stop)
                self._write_map(o, self.WG_ROWS, f"option tma_store: {P.name} is also loaded")
                self.tma_stores[id(o)] = f"{P.name}_out"
        out_bytes = sum(self.consumers * self.WG_ROWS * o.ins[0].cols * 2 for o in k.walk()
                        if isinstance(o, ir.Op) and id(o) in self.tma_stores)
        vec_bytes = sum(-(-o.outs[0].rows * 4 // 128) * 128 for o in loop.body if id(o) in self.vec_tma)
        # shared tiles the consumers write (dS for dQ's mma), in two copies by default: a block writes
        # one while the other's last readers may still run, so one barrier a block orders them (below)
        self.written = [o.outs[0] for o in k.walk() if isinstance(o, ir.Op) and o.name == "store_shared"]
        self.ds_stages = int(self.options.get("ds_stages", 2)) if self.written else 1
        # a written shared tile read only by split-K mmas: each warpgroup reads back the rows it wrote
        # (its slice of the sum), so the barriers around it are its own, not every consumer's
        readers = {id(t): [n for n in mmas if t in n.ins[:2]] for t in self.written}
        self.own_rows = {id(t) for t in self.written
                         if readers[id(t)] and all(n.outs[0] in self.split_k for n in readers[id(t)])}
        if self.ds_stages not in (1, 2):
            self._fail(f"ds_stages={self.ds_stages}: one or two copies of the shared tiles the consumers write")
        # transposed store_adds issued by warp 1 of the producer warpgroup (FlashAttention-3's dQ writer)
        # instead of a consumer thread that waits for the last reduce's reads
        self.reducer = bool(self.options.get("reducer", True)) and bool(self.reduces)

        def smem(stages):  # tiles and staging (1 KB multiples) + vector windows and barriers (under 256 bytes),
            # rounded to the struct's 1 KB alignment + 1 KB of slack to align the window's start
            return (sum(t.numel * 2 * (stages if t in self.ring else self.ds_stages if t in self.written else 1)
                        for t in k.tiles if t.kind == "shared") + red_bytes + out_bytes
                    + -(-(vec_bytes * stages + 256) // 1024) * 1024 + 1024)
        if "stages" not in self.options:
            # the ring is at least as deep as declared, deeper while shared memory allows (up to 4):
            # a stage is released only when its last wgmma retires, mid-way through the next iteration
            while self.stages < 4 and smem(self.stages + 1) <= SMEM_LIMIT:
                self.stages += 1
        self.smem_bytes = smem(self.stages)
        if self.smem_bytes > SMEM_LIMIT:
            self._fail(f"{self.stages} stages need {self.smem_bytes} bytes of shared memory (limit {SMEM_LIMIT})")

    def _staged_cols(self, t: ir.Tile) -> str:
        """Columns of a warpgroup's f32 staging tile for a TMA reduce of t: its part of a transposed
        tile's columns, or all of a split-K product's."""
        return t.cols if t in self.split_k else self.WG_ROWS

    def _write_map(self, o: ir.Op, rows: int, loaded: str) -> None:
        """The TMA map a store or store_add `o` writes its tensor through, boxes of `rows` rows; a tensor
        the kernel also loads is refused (`loaded`: why)."""
        view = o.ins[1]
        key = (id(view.param), rows)
        if key in self.maps:
            self._fail(loaded, o)
        self.maps[key] = f"map_{view.param.name}"
        self.map_info[self.maps[key]] = (view.param, rows, view.kept[0])

    def _trips(self, loop: ir.Loop, last: int) -> int:
        """Trip count of `loop` for the first (last=0) or last (last=-1) value of program id 0 in a
        sample problem (every size 4096, the other program ids and loop indices 0): which end of the
        grid holds the heavy programs."""
        env = {}
        for e in (loop.start, loop.stop, self.k.grid[0]):
            env.update({x.name: 0 if x.kind in ("pid", "loop") else 4096 for x in ir.symbols(e)})
        if last:
            env["pid0"] = int(ir.evaluate(ir.as_expr(self.k.grid[0]), env)) - 1
        return int(ir.evaluate(ir.as_expr(loop.stop), env)) - int(ir.evaluate(ir.as_expr(loop.start), env))

    # ------------------------------------------------------------------ orientation
    def orient(self) -> None:
        """Decide which register tiles are held TRANSPOSED (self.flipped).

        wgmma takes its A operand from registers only untransposed: rows = M, the rows the
        consumer warpgroups split. `mma(acc, a, b, ta=True)` with a register tile `a` (attention's
        dV += Pᵀ dO and dK += dSᵀ Q) therefore needs `a` held as aᵀ. Orientation is shared by every
        tile an elementwise, mask or broadcast op connects (P is a cast of S, so S is held as Sᵀ, and
        S comes from an mma: Sᵀ = K Qᵀ swaps that mma's operands), and a row vector that scales
        transposed tiles becomes a column vector. This is FlashAttention-3's swapped backward: the
        scores never leave the registers."""
        parent: Dict[ir.Tile, ir.Tile] = {}

        def find(t):
            while parent.get(t, t) is not t:
                t = parent[t]
            return t

        def union(ts):
            ts = [find(t) for t in ts]
            for t in ts[1:]:
                if t is not ts[0]:
                    parent[t] = ts[0]

        seeds = []
        for n in self.k.walk():
            if not isinstance(n, ir.Op) or n.name in ("load", "store", "load_async", "wait"):
                continue
            if n.name == "mma":
                a = n.ins[0]
                if a.kind == "reg" and n.attrs.get("ta", False):
                    seeds.append(a)
                continue
            union([t for t in tiles_of(n) if t.kind in ("reg", "vec")])
        roots = {find(t) for t in seeds}
        self.flipped = {t for t in self.k.tiles if t.kind in ("reg", "vec") and find(t) in roots}
        mmas = [n for n in self.k.walk() if isinstance(n, ir.Op) and n.name == "mma"]
        rows = self.stored(mmas[0].outs[0])[0] if mmas else None
        for n in mmas:
            # an mma of two shared tiles may write its accumulator transposed at no cost (Cᵀ = Bᵀ Aᵀ):
            # it is, where the tile's columns, not its rows, are the rows the warpgroups split
            # (attention_bwd_fused's dQ block, 64 queries x 128 = D, beside 128-key tiles)
            acc = n.outs[0]
            if (acc not in self.flipped and all(x.kind == "shared" for x in n.ins) and acc.rows != rows
                    and acc.cols == rows):
                roots.add(find(acc))
                self.flipped |= {t for t in self.k.tiles if t.kind in ("reg", "vec") and find(t) is find(acc)}
        # a shared tile written from transposed registers is laid out transposed too (a plain store)
        self.flipped |= {n.outs[0] for n in self.k.walk()
                         if isinstance(n, ir.Op) and n.name == "store_shared" and n.ins[0] in self.flipped}
        for n in self.k.walk():
            if isinstance(n, ir.Op) and n.name in ("row_max", "row_sum") and n.ins[0] in self.flipped:
                self._fail(f"{n.name} of {n.ins[0].name}, which is held transposed: a column reduction "
                           "across the warpgroups' rows is not lowered", n)

    def stored(self, t: ir.Tile) -> Tuple[int, int]:
        """(rows, cols) of a register or shared tile as the consumers hold it."""
        return (t.cols, t.rows) if t in self.flipped and t.kind in ("reg", "shared") else (t.rows, t.cols)

    # ------------------------------------------------------------------ producer
    def tma_coords(self, view: ir.View, row, col) -> List[str]:
        """Coordinates of a load's box, innermost axis first, padded to rank 4."""
        P = view.param
        out = []
        for axis in reversed(range(P.rank)):
            if axis == view.kept[1]:
                out.append(self.expr(col))
            elif axis == view.kept[0]:
                out.append(self.expr(row))
            else:
                out.append(self.expr(view.index[axis]))
        return out + ["0"] * (4 - len(out))

    def bounds(self, n: ir.Loop) -> Tuple[str, str]:
        """The C++ start and stop of a loop: the split walk narrows the pipelined loop to the unit's
        part of its range (kb_begin, kb_end, set with the unit)."""
        if self.split is not None and n is self.loop:
            i = self.sym_name(n.index)
            return f"{i}_begin", f"{i}_end"
        return self.expr(n.start), self.expr(n.stop)

    def store_ring(self, n: ir.Op, pending: List[_Group], pad: str) -> List[str]:
        """A store of option ring_store: into this warpgroup's part of the kept stage's tile, then one
        thread's TMA store; a program with no iteration kept no stage and stores from registers. (A test
        of `staged` here, for a stage a program with no iteration did not give back, makes ptxas
        serialize the loop's wgmmas, C7519.)"""
        t, view = n.ins
        lines: List[str] = []
        self.wait_for([t], pending, lines, pad)
        src, typ = self.ring_stores[id(n)]
        c = self.tma_coords(view, n.attrs["row"], n.attrs["col"])
        at = view.param.rank - 1 - view.kept[0]
        c[at] = f"{c[at]} + wg_row0"
        m = self.maps[(id(view.param), self.WG_ROWS)]
        # (a program with an iteration gave the last program's stage back under its first turn; one with
        # none leaves it to the next that has one: `staged` is only ever set here, where it is free)
        if self.split is not None and id(n) in self.split["stores"]:
            # a part of the split tail stores its rows from registers into the workspace, and its kept
            # stage goes back unused under the next program's first turn, as a stored one does
            ring = "part < 0 && out_stage >= 0"
            other = [f"{pad}  if (out_stage >= 0) {{  // the other warpgroup's arrival is taken; the stage goes back unused",
                     f"{pad}    arch::bar_sync(8 + cw, 256);",
                     f"{pad}    staged = out_stage;",
                     f"{pad}  }}", *self.split_store(n, pad + "  ")]
        else:
            ring, other = "out_stage >= 0", [f"{pad}  {self.op_line(n)}"]
        return lines + [
            f"{pad}if ({ring}) {{",
            f"{pad}  arch::bar_sync(8 + cw, 256);  // the other warpgroup's last read of "
            f"{self.var(src, 'out_stage')} has retired",
            f"{pad}  auto& stage = carve<{typ[3:-1]}, CONSUMERS>({self.var(src, 'out_stage')}, cw);",
            f"{pad}  store_stmatrix(stage, {self.var(t)}, 0);  // registers -> swizzled shared, as "
            f"{view.param.dtype.name}",
            f"{pad}  arch::fence_proxy_async();  // generic-proxy stores, visible to the TMA unit",
            f"{pad}  arch::bar_sync(4 + cw, 128);",
            f"{pad}  if (wg_thread() == 0) {{",
            f"{pad}    store_async_4d({m}, stage, {', '.join(c)});",
            f"{pad}    arch::tma_store_commit();",
            f"{pad}  }}",
            f"{pad}  staged = out_stage;  // handed back under the next program's first turn",
            f"{pad}}} else {{",
            *other,
            f"{pad}}}"]

    @staticmethod
    def give_back(stage: str) -> List[str]:
        """Option ring_store: the kept stage goes back to the producer once this warpgroup's store has read it."""
        return ["if (wg_thread() == 0) arch::tma_store_wait_read<0>();  // the store has read the stage",
                "arch::bar_sync(4 + cw, 128);",
                f"release(S.ring.empty[{stage}]);",
                f"{stage} = -1;"]

    def split_store(self, n: ir.Op, pad: str) -> List[str]:
        """A store of the merge's out or lse: the whole tile's, or a part's into the workspace."""
        BM, C = self.BM, self.split["cols"]
        t = n.ins[0]
        if self.split["stores"][id(n)] == "out":
            part = (f"store(split_ws + (long long)(prog - split_whole) * {BM * C}, {C}LL, {BM}, {C}, {self.var(t)}, "
                    "wg_row0, 0);")
        else:
            part = (f"store(split_ws + (long long)(programs - split_whole) * split_parts * {BM * C} + "
                    f"(prog - split_whole) * {BM}, 1LL, {BM}, {self.var(t)}, wg_row0);")
        what = ("its rows normalized by its own sums" if self.split["stores"][id(n)] == "out"
                else "its rows' log-sum-exp")
        return [f"{pad}if (part < 0) {{",
                f"{pad}  {self.op_line(n)}",
                f"{pad}}} else {{  // a part: {what}, into the workspace for the merge kernel",
                f"{pad}  {part}",
                f"{pad}}}"]

    def producer_load(self, o: ir.Op, bar: str) -> List[str]:
        """The IR op as a comment line, then its TMA load."""
        view, t = o.ins[0], o.outs[0]
        m = self.maps[(id(view.param), t.rows)]
        c = self.tma_coords(view, o.attrs["row"], o.attrs["col"])
        return [f"// {ir.format_op(o)}", f"load_async_4d({self.var(t)}, {m}, {bar}, {', '.join(c)});"]

    def kv_loads(self, loads) -> List[str]:
        """Option kv_rings: the tiles read this iteration on the ring's barriers, then the deferred mma's
        tile on its own (`S.late`), each load behind its own stage's release."""
        lines = []
        for ring, group in (("ring", [x for x in loads if x.outs[0] is not self.late_tile]),
                            ("late", [x for x in loads if x.outs[0] is self.late_tile])):
            why = "a fresh ring counts as released" if ring == "ring" else "released once the deferred mma has read it"
            lines.append(f"wait(S.{ring}.empty[pos.stage], pos.phase ^ 1);  // {why}")
            lines.append(f"expect_tiles(S.{ring}.full[pos.stage], {', '.join(self.var(x.outs[0]) for x in group)});")
            lines += [line for x in group for line in self.producer_load(x, f"S.{ring}.full[pos.stage]")]
        return lines

    def producer(self, nodes, depth) -> List[str]:
        pad = "  " * depth
        lines = []
        for n in nodes:
            if isinstance(n, ir.Loop):
                if not any(isinstance(x, ir.Op) and x.name == "load_async" for x in self.k.walk([n])):
                    continue
                i = self.sym_name(n.index)
                start, stop = self.bounds(n)
                lines.append(f"{pad}for (int {i} = {start}; {i} < {stop}; ++{i}) {{")
                if n is self.loop:
                    loads = [x for x in n.body if isinstance(x, ir.Op) and x.name == "load_async"]
                    vecs = [x for x in n.body if isinstance(x, ir.Op) and id(x) in self.vec_tma]
                    staged = [self.var(x.outs[0]) for x in loads] + [f"S.{self.vec_tma[id(x)]}[pos.stage]" for x in vecs]
                    if self.late_tile is not None:  # option kv_rings: each tile on its own barriers
                        lines += self.with_loop_lets(n, pad + "  ", lambda: [
                            pad + "  " + line for line in self.kv_loads(loads)])
                    else:
                        lines.append(f"{pad}  wait(S.ring.empty[pos.stage], pos.phase ^ 1);  // a fresh ring counts as released")
                        lines.append(f"{pad}  expect_tiles(S.ring.full[pos.stage], {', '.join(staged)});")
                        lines += self.with_loop_lets(n, pad + "  ", lambda: [
                            pad + "  " + line for x in loads for line in self.producer_load(x, "S.ring.full[pos.stage]")])
                    for x in vecs:
                        m = self.maps[(id(x.ins[0].param), x.outs[0].rows)]
                        lines.append(f"{pad}  // {ir.format_op(x)}")
                        lines.append(f"{pad}  load_async_4d(S.{self.vec_tma[id(x)]}[pos.stage], {m}, S.ring.full[pos.stage], "
                                     f"{', '.join(self.vec_coords(x))});")
                    lines.append(f"{pad}  pos.advance();")
                else:
                    lines += self.producer(n.body, depth + 1)
                lines.append(f"{pad}}}")
            elif n.name == "load_async" and self.tokens[n.attrs["token"]][0] == "once":
                i = self.tokens[n.attrs["token"]][1]
                if self.persistent:
                    lines.append(f"{pad}if (it > 0) wait(S.once_empty[{i}], (it - 1) & 1);  // the previous tile's copy is released")
                lines.append(f"{pad}expect_tiles(S.once[{i}], {self.var(n.outs[0])});")
                lines += [pad + line for line in self.producer_load(n, f"S.once[{i}]")]
        return lines

    # ------------------------------------------------------------------ consumers
    def row(self, e) -> str:
        return f"{self.expr(e)} + wg_row0"

    def view_ptr(self, view: ir.View) -> str:
        P = view.param
        terms = [f"{self.expr(ix) if isinstance(ir.as_expr(ix), (ir.Sym, ir.Const)) else f'({self.expr(ix)})'} * "
                 f"{self.sym_name(P.strides[a])}" for a, ix in enumerate(view.index) if ix is not None]
        return P.name + "".join(f" + {t}" for t in terms)

    def wait_for(self, tiles, pending: List[_Group], lines: List[str], pad: str, release: bool = True,
                 keep_held: bool = False) -> None:
        """Retire the in-flight wgmma groups that touch `tiles` (and every older group: groups retire
        in order, so the wait count is the number of newer groups). The held ring stage is released
        once no group still in flight reads it, or with `keep_held` kept as out_stage (ring_store)."""
        idx = [i for i, g in enumerate(pending) if g.touches(tiles)]
        if not idx:
            return
        last = max(idx)
        retired, keep = pending[:last + 1], pending[last + 1:]
        accs = []
        for g in retired:
            if g.acc not in accs:
                accs.append(g.acc)
        lines.append(f"{pad}mma_wait<{len(keep)}>({', '.join(self.var(a) for a in accs)});")
        if release and any(g.stage == "held" for g in retired) and not any(g.stage == "held" for g in keep):
            if keep_held:  # option ring_store: the stage is kept for the store after the loop
                if self.late_tile is not None:  # (kv_rings: K's stage is kept, V's goes back)
                    lines.append(f"{pad}if (held >= 0) release(S.late.empty[held]);  // {self.late_tile.name}'s last "
                                 "reader retired")
                lines.append(f"{pad}const int out_stage = held;  // kept (-1: no iteration): the store after the loop "
                             "stages its tile there")
                lines.append(f"{pad}held = -1;")
            else:
                ring = "ring" if self.late_tile is None else "late"
                lines.append(f"{pad}if (held >= 0) release(S.{ring}.empty[held]), held = -1;  // its last reader retired")
        if self.late_tile is not None and self.in_loop_body and not self.early_released \
                and any(g.stage == "cur" for g in retired) and not any(g.stage == "cur" for g in keep):
            if self.ring_stores:  # the last iteration's stage is kept for the O store (option ring_store)
                i = self.sym_name(self.loop.index)
                lines.append(f"{pad}if ({i} + 1 != {self.loop_stop}) release(S.ring.empty[pos.stage]);  // its tiles' last "
                             "readers retired; the last one's is kept for the store")
            else:
                lines.append(f"{pad}release(S.ring.empty[pos.stage]);  // its tiles' last readers retired (the deferred "
                             f"mma's {self.late_tile.name} has barriers of its own)")
            self.early_released = True
        pending[:] = keep
        carved = {id(src) for src, _ in self.ring_stores.values()}
        if self.in_loop_body and any(id(t) in carved for g in retired for t in g.reads) \
                and not any(id(t) in carved for g in keep for t in g.reads):
            i = self.sym_name(self.loop.index)
            lines.append(f"{pad}if ({i} + 1 == {self.loop_stop}) arch::bar_arrive(8 + (1 - cw), 256);  "
                         "// my last read of the kept stage's tile: the other warpgroup may store through it")
        for t in {t for g in retired for t in g.reads if id(t) in self.early}:
            if self.in_loop_body and not any(t in g.reads for g in keep):
                i = self.sym_name(self.loop.index)
                lines.append(f"{pad}if ({i} + 1 == {self.loop_stop}) release(S.once_empty[{self.early[id(t)]}]);  "
                             f"// {t.name} is read no more this tile: the next one loads under the rest")

    def with_loop_lets(self, loop: ir.Loop, pad: str, emit) -> List[str]:
        return super().with_loop_lets(loop, pad, emit, RESERVED | {"tile", "part", "units", "kb_stop"})

    def zero_past_stops(self, pad: str) -> List[str]:
        """After a consumer's wait for a ring stage: the rows of each loop tile whose view stops short
        (K[b, :seq_k, hk, :]) at or past the stop set to zero, in a stage whose box ran past it. TMA
        fills zeros only past the tensor's end; past a sequence's count the cache holds whatever it
        holds, and a NaN there would meet P's exact zeros in P V. Each consumer warpgroup zeroes the
        rows itself before its own wgmmas read them (the other one writes the same zeros), so none
        waits for the other."""
        spans: Dict[Tuple[str, str], List[ir.Op]] = {}  # (first row, stop) -> the loads cut there
        for o in self.loop.body:
            if not (isinstance(o, ir.Op) and o.name == "load_async" and o.ins[0].stops):
                continue
            t, view = o.outs[0], o.ins[0]
            r, c = view.kept
            if view.stop(c) is not None or t in self.flipped or t not in self.ring:
                self._fail(f"{view.text()}: a window stopped short is taken along its rows, into a ring stage held "
                           "as loaded", o)
            spans.setdefault((self.expr(o.attrs["row"]), self.expr(view.stop(r)), t.rows), []).append(o)
        if not spans:
            return []

        def emit(inner):
            lines = []
            for (_, _, rows), loads in spans.items():
                o = loads[0]
                row, stop = self.expr(o.attrs["row"]), self.expr(o.ins[0].stop(o.ins[0].kept[0]))
                views = ", ".join(x.ins[0].text() for x in loads)
                lines.append(f"{inner}if ({row} + {rows} > {stop}) {{  // the box runs past {views}: its rows from "
                             "the stop on read as zeros")
                lines += [f"{inner}  zero_rows({self.var(x.outs[0])}, {stop} - ({row}), wg_thread(), 128);" for x in loads]
                lines += [f"{inner}  arch::fence_proxy_async();  // the zeros, seen by the wgmmas' async proxy",
                          f"{inner}  arch::bar_sync(4 + cw, 128);  // all of this warpgroup's zeros are in",
                          f"{inner}}}"]
            return lines

        lines = self.with_loop_lets(self.loop, pad + "  ", lambda: emit(pad + "  "))
        if len(lines) == len(emit(pad + "  ")):  # no value of the loop's index named: no scope of its own
            return emit(pad)
        return [f"{pad}{{  // the key block's place in its page"] + lines + [f"{pad}}}"]

    def zero_past_stop_once(self, o: ir.Op, pad: str) -> List[str]:
        """After a consumer's wait for a one-shot tile whose window stops short (Q[:n, :]): its rows at or
        past the stop set to zero, where the box ran past it, before any wgmma or register copy reads
        them; as zero_past_stops does for the ring stages (each warpgroup writes the same zeros)."""
        view, t = o.ins[0], o.outs[0]
        if not view.stops:
            return []
        r, c = view.kept
        if view.stop(c) is not None or t in self.flipped:
            self._fail(f"{view.text()}: a window stopped short is taken along its rows, into a tile held as loaded", o)
        row, stop = self.expr(o.attrs["row"]), self.expr(view.stop(r))
        return [f"{pad}if ({row} + {t.rows} > {stop}) {{  // the box runs past {view.text()}: its rows from the "
                "stop on read as zeros",
                f"{pad}  zero_rows({self.var(t)}, {stop} - ({row}), wg_thread(), 128);",
                f"{pad}  arch::fence_proxy_async();  // the zeros, seen by the wgmmas' async proxy",
                f"{pad}  arch::bar_sync(4 + cw, 128);  // all of this warpgroup's zeros are in",
                f"{pad}}}"]

    def op_line(self, n: ir.Op) -> str:
        v = self.var
        name = n.name
        if name == "fill":
            return f"fill({v(n.outs[0])}, {self.fexpr(n.attrs['value'])});"
        if name in ("exp", "exp2", "log", "log2", "neg", "abs", "rsqrt", "copy"):
            return f"{name}({v(n.outs[0])}, {v(n.ins[0])});"
        if name in ("add", "sub", "mul", "div", "max", "min"):
            b = n.ins[1]
            rhs = v(b) if isinstance(b, ir.Tile) else self.fexpr(b)
            return f"{name}({v(n.outs[0])}, {v(n.ins[0])}, {rhs});"
        flip = bool(n.outs) and n.outs[0] in self.flipped
        if name in ("add_row", "sub_row", "mul_row", "div_row") and flip:
            # the tile is held transposed: its logical rows are our columns (a column vector)
            return f"{name[:-4]}_col({', '.join(v(x) for x in n.outs + n.ins)});"
        if name in ("add_row", "sub_row", "mul_row", "div_row", "cast"):
            return f"{name}({', '.join(v(x) for x in n.outs + n.ins)});"
        if name == "row_max" and len(n.ins) == 2 and self.tree_max:
            return f"row_max<true>({', '.join(v(x) for x in n.outs + n.ins)});  // the maximum as a tree"
        if name == "row_sum" and n.outs[0] in self.quad_sums:
            return (f"row_sum_partial({', '.join(v(x) for x in n.outs + n.ins)});  "
                    "// this lane's columns: the quad's lanes are added after the loop")
        if name in ("row_max", "row_sum"):
            return f"{name}({', '.join(v(x) for x in n.outs + n.ins)});"
        # masks on a transposed tile swap the axes: logical columns are the rows the warpgroups split
        if name == "mask_cols":
            a = n.attrs
            if flip:
                return f"mask_rows({v(n.outs[0])}, {self.row(a['col0'])}, {self.expr(a['limit'])}, {self.fexpr(a['value'])});"
            return f"mask_cols({v(n.outs[0])}, {self.expr(a['col0'])}, {self.expr(a['limit'])}, {self.fexpr(a['value'])});"
        if name == "mask_rows":
            a = n.attrs
            if flip:
                return f"mask_cols({v(n.outs[0])}, {self.expr(a['row0'])}, {self.expr(a['limit'])}, {self.fexpr(a['value'])});"
            return f"mask_rows({v(n.outs[0])}, {self.row(a['row0'])}, {self.expr(a['limit'])}, {self.fexpr(a['value'])});"
        if name in ("mask_causal", "mask_window"):  # a diagonal's two sides: the same arguments
            a = n.attrs
            if flip:
                return (f"{name}_transposed({v(n.outs[0])}, {self.expr(a['row0'])}, {self.row(a['col0'])}, "
                        f"{self.expr(a['offset'])}, {self.fexpr(a['value'])});")
            return (f"{name}({v(n.outs[0])}, {self.row(a['row0'])}, {self.expr(a['col0'])}, "
                    f"{self.expr(a['offset'])}, {self.fexpr(a['value'])});")
        if name == "fill_where":
            if flip:
                self._fail("fill_where on a column vector is not lowered", n)
            a = n.attrs
            if a["cmp"] not in CMP:
                self._fail(f"fill_where comparison {a['cmp']!r}", n)
            return (f"fill_where({v(n.outs[0])}, {v(n.ins[0])}, [](float x) {{ return x {a['cmp']} "
                    f"{self.fexpr(a['rhs'])}; }}, {self.fexpr(a['value'])});")
        if name == "store_add":
            t, view = n.ins
            P = view.param
            r, c = view.kept
            if view.rank != 2 or c != P.rank - 1:
                self._fail("store_add: the tile's columns must be the view's last axis", n)
            a = n.attrs
            return (f"store_add({self.view_ptr(view)}, {self.sym_name(P.strides[r])}, {self.sym_name(P.dims[r])}, "
                    f"{self.sym_name(P.dims[c])}, {v(t)}, {self.row(a['row'])}, {self.expr(a['col'])});")
        if name in ("store", "load") and any(t in self.flipped for t in tiles_of(n) if t.kind == "reg"):
            self._fail(f"{name} of a register tile held transposed is not lowered", n)
        if name == "store":
            t, view = n.ins
            P = view.param
            if t in self.flipped:
                self._fail("store of a column vector is not lowered", n)
            if view.rank == 2 and t.kind == "reg":
                r, c = view.kept
                if c != P.rank - 1:
                    self._fail("store: the tile's columns must be the view's last axis", n)
                return (f"store({self.view_ptr(view)}, {self.sym_name(P.strides[r])}, {self.extent(view, r)}, "
                        f"{self.extent(view, c)}, {v(t)}, {self.row(n.attrs['row'])}, {self.expr(n.attrs['col'])});")
            if view.rank == 1 and t.kind == "vec":
                r = view.kept[0]
                return (f"store({self.view_ptr(view)}, {self.sym_name(P.strides[r])}, {self.extent(view, r)}, "
                        f"{v(t)}, {self.row(n.attrs['row'])});")
            self._fail(f"store of {t.type_str()} to a {view.rank}-D view", n)
        if name == "load":
            t, src = n.outs[0], n.ins[0]
            if isinstance(src, ir.View) and src.rank == 1 and t.kind == "vec":
                return self.vec_load(n, v(t))
            if isinstance(src, ir.View) and src.rank == 2 and t.kind == "reg":
                P, (r, c) = src.param, src.kept
                return (f"load({v(t)}, {self.view_ptr(src)}, {self.sym_name(P.strides[r])}, {self.sym_name(P.dims[r])}, "
                        f"{self.sym_name(P.dims[c])}, {self.row(n.attrs['row'])}, {self.expr(n.attrs['col'])});")
            self._fail(f"load into {t.type_str()} from {getattr(src, 'name', src)}", n)
        self._fail(f"op {name!r} has no Hopper lowering", n)

    def vec_load(self, n: ir.Op, dst: str, names: Optional[Dict[str, str]] = None) -> str:
        """A vector's bounded load from a 1-D view into `dst`; `names` spells symbols otherwise (the
        loop index one iteration on, for a prefetch)."""
        t, src = n.outs[0], n.ins[0]
        P, r = src.param, src.kept[0]
        # a column vector runs along the unsplit axis: every warpgroup loads the whole window
        at = self.expr(n.attrs["row"], names)
        if t not in self.flipped:
            at += " + wg_row0"
        terms = [f"{self.expr(ix, names) if isinstance(ir.as_expr(ix), (ir.Sym, ir.Const)) else f'({self.expr(ix, names)})'} * "
                 f"{self.sym_name(P.strides[a])}" for a, ix in enumerate(src.index) if ix is not None]
        ptr = P.name + "".join(f" + {x}" for x in terms)
        return f"load({dst}, {ptr}, {self.sym_name(P.strides[r])}, {self.sym_name(P.dims[r])}, {at});"

    def wgmma_operands(self, n: ir.Op) -> Tuple[ir.Tile, bool, ir.Tile, bool]:
        """(A, A transposed, B, B transposed) of the wgmma an mma becomes. wgmma computes
        D (M x N) += A (M x K) · B (K x N) with M the rows the warpgroups split; an accumulator held
        transposed is computed as Cᵀ = op(b)ᵀ op(a)ᵀ, so the operands swap roles, and a shared tile
        laid out transposed (written from transposed registers) flips its operand's form."""
        acc, a, b = n.outs[0], n.ins[0], n.ins[1]
        ta, tb = n.attrs.get("ta", False), n.attrs.get("tb", False)
        if acc in self.flipped:
            wa, wa_t, wb, wb_t = b, not tb, a, not ta
        else:
            wa, wa_t, wb, wb_t = a, ta, b, tb
        wa_t ^= wa.kind == "shared" and wa in self.flipped
        wb_t ^= wb in self.flipped
        return wa, wa_t, wb, wb_t

    def mma_line(self, n: ir.Op, stage: str = "pos.stage") -> Tuple[str, _Group]:
        acc, a, b = n.outs[0], n.ins[0], n.ins[1]
        accum = n.attrs.get("accumulate", True)
        if acc.kind != "reg" or acc.dtype.name != "f32":
            self._fail("mma accumulates into an f32 register tile", n)
        if a.dtype != b.dtype or a.dtype.name not in ("bf16", "f16"):
            self._fail(f"mma operands must both be bf16 or f16, got {a.dtype} and {b.dtype}", n)
        wa, wa_t, wb, wb_t = self.wgmma_operands(n)
        if wb.kind != "shared":
            self._fail(f"mma: {wb.name} would be wgmma's B operand, which must be a shared tile", n)
        if wa.kind == "reg" and (wa in self.flipped) != wa_t:
            self._fail(f"mma: register tile {wa.name} is wgmma's A operand and must be held "
                       f"{'transposed' if wa_t else 'untransposed'}", n)
        fn = "mma_ABt" if wb_t else "mma_AB"  # B given N x K (K-major) or K x N (MN-major)
        acc_s = "false" if not accum else "true"
        in_ring = any(t in self.ring for t in (a, b))
        g_stage = ("cur" if stage == "pos.stage" else "held") if in_ring else None
        reads = [t for t in (wa, wb) if t.kind == "shared"]
        if acc in self.split_k:
            if not (wa.kind == "shared" and wa_t and not wb_t):
                self._fail(f"mma into {acc.name} (a sum the warpgroups split): lowered with A given K x M and "
                           f"B given K x N (mma_AtB_slice) only", n)
            call = (f"mma_AtB_slice<WG_ROWS>({self.var(acc)}, {self.var(wa, stage)}, {self.var(wb, stage)}, "
                    f"wg_row0, {acc_s});  // this warpgroup's rows of the sum")
            return call, _Group(acc, None, g_stage, reads)
        if id(wa) in self.resident and not wa_t:
            call = f"{fn}({self.var(acc)}, {self.resident[id(wa)]}, {self.var(wb, stage)}, {acc_s});  // A from registers"
            return call, _Group(acc, None, g_stage, [wb])
        if wa.kind == "shared" and wa_t:
            # A given K x M (MN-major, wgmma's transpose bit for A): this warpgroup's rows of the
            # product are columns wg_row0.. of the tile
            fn = "mma_AtBt" if wb_t else "mma_AtB"
            call = f"{fn}({self.var(acc)}, {self.var(wa, stage)}, wg_row0, {self.var(wb, stage)}, {acc_s});"
            g = _Group(acc, None, g_stage, reads)
        elif wa.kind == "shared":
            call = f"{fn}({self.var(acc)}, {self.var(wa, stage)}, wg_row0, {self.var(wb, stage)}, {acc_s});"
            g = _Group(acc, None, g_stage, reads)
        else:
            call = f"{fn}({self.var(acc)}, {self.var(wa)}, {self.var(wb, stage)}, {acc_s});"
            g = _Group(acc, wa, g_stage, reads)
        return call, g

    def consumer(self, nodes, depth, pending: List[_Group]) -> List[str]:
        pad = "  " * depth
        lines: List[str] = []
        for n in nodes:
            if isinstance(n, ir.Loop):
                lines += self.consumer_loop(n, depth, pending)
                continue
            if n is self.deferred:
                continue  # issued one iteration later (see consumer_loop)
            if n.name == "load_async":
                continue
            note = "  [hoisted: issued early so it runs under the ops before its first use]" if n in self.hoisted else ""
            fold = self.fold.get(id(n))
            if fold is not None and fold[0] == "skip":
                lines.append(f"{pad}// {ir.format_op(n)}  [folded into {fold[1]}]")
                continue
            if fold is not None:
                note = ("  [the maximum before the scale, scaled once a row]" if n.name == "row_max"
                        else "  [with the mul above and the exp2 below: one FFMA and one EX2 an element]")
            lines.append(f"{pad}// {ir.format_op(n)}{note}")
            ci = len(lines) - 1  # the op's comment: moved down past the waits its operands need, onto its own line
            if n.name == "wait":
                kind, _ = self.tokens[n.attrs["tokens"][0]]
                if kind == "ring":  # one barrier per stage covers every load of the iteration
                    lines.append(f"{pad}wait(S.ring.full[pos.stage], pos.phase);")
                    lines += self.zero_past_stops(pad)
                    if self.late_tile is not None and not self.peeling:  # option kv_rings
                        lines.append(self.late_wait(pad, guard=not self.peel))
                else:  # each one-shot load completes on its own barrier
                    for t in n.attrs["tokens"]:
                        i = self.tokens[t][1]
                        lines.append(f"{pad}wait(S.once[{i}], {'it & 1' if self.persistent else '0'});")
                        lines += self.zero_past_stop_once(self.once[i], pad)
                        tile = self.once[i].outs[0]
                        if id(tile) not in self.resident:
                            continue
                        # its register copy is read in right after its own barrier: it loads while
                        # the wait's later tiles still land
                        self.wait_for([g.acc for g in pending], pending, lines, pad)  # none reads the old copy
                        lines.append(f"{pad}load({self.resident[id(tile)]}, {self.var(tile)}, wg_row0);  "
                                     f"// this warpgroup's rows of {tile.name}: the A operand its wgmmas read from registers")
                        if id(tile) in self.resident_only and self.persistent:
                            lines.append(f"{pad}release(S.once_empty[{i}]);  // {tile.name} is read no more from "
                                         "shared memory: the next program's copy loads under this one")
                continue
            if n.name == "store_shared":
                lines += self.store_shared(n, pending, pad)
                continue
            if id(n) in self.vec_tma:
                lines.append(f"{pad}load({self.var(n.outs[0])}, S.{self.vec_tma[id(n)]}[pos.stage]);  "
                             "// this stage's window, loaded by TMA with its tiles")
                continue
            if id(n) in self.prefetch:
                t, i = n.outs[0], self.loop.index.name
                lines.append(f"{pad}{self.var(t)} = {self.var(t)}_next;  // loaded one iteration ahead")
                lines.append(pad + self.vec_load(n, f"{self.var(t)}_next", {i: f"({self.sym_name(self.loop.index)} + 1)"}))
                continue
            if n.name == "store_add" and id(n) in self.reduces:
                lines += self.reduce_add(n, pending, pad)
                continue
            if n.name == "store" and id(n) in self.tma_stores:
                lines += self.store_tma(n, pending, pad)
                continue
            if n.name == "store" and id(n) in self.ring_stores:
                lines += self.store_ring(n, pending, pad)
                continue
            if n.name == "store" and self.split is not None and id(n) in self.split["stores"]:
                self.wait_for(tiles_of(n), pending, lines, pad)
                lines.append(lines.pop(ci))
                lines += self.split_store(n, pad)
                continue
            if n.name == "mma":
                self.wait_for(tiles_of(n), pending, lines, pad)
                lines.append(lines.pop(ci))
                call, g = self.mma_line(n)
                if self.pingpong and n is self.turn_sync:
                    lines.append(f"{pad}arch::bar_sync(1 + cw, 256);  // my turn on the tensor cores")
                lines.append(pad + call)
                lines.append(f"{pad}mma_commit();")
                pending.append(g)
                if self.deferred is not None and n is self.deferred_after:
                    lines += self.deferred_mma(pad, pending, "the previous iteration's", guard=not self.peel)
                if self.pingpong and n is self.turn_arrive:
                    lines.append(f"{pad}arch::bar_arrive(2 - cw, 256);  // the other warpgroup's turn")
                if self.ring_stores and self.peeling and n is self.turn_arrive:
                    lines.append(f"{pad}if (staged >= 0) {{  // the last program's stage, once its store has read it")
                    lines += [f"{pad}  {x}" for x in self.give_back("staged")]
                    lines.append(f"{pad}}}")
                continue
            self.wait_for(tiles_of(n), pending, lines, pad)
            lines.append(lines.pop(ci))
            lines.append(pad + (self.folded_line(n, fold[1]) if fold is not None else self.op_line(n)))
        return lines

    def folded_line(self, n: ir.Op, scale) -> str:
        """row_max / sub_row with the scale plan_fold took out of the mul before them."""
        v, c = self.var, self.fexpr(scale)
        if n.name == "row_max":
            tree = "<true>" if self.tree_max else ""  # the maximum as a tree (ops.h row_max_tree)
            return f"row_max_scaled{tree}({v(n.outs[0])}, {v(n.ins[0])}, {c}, {v(n.ins[1])});"
        form = "col" if n.outs[0] in self.flipped else "row"  # a tile held transposed: its rows are our columns
        return f"exp2_scaled_{form}({v(n.outs[0])}, {v(n.ins[0])}, {c}, {v(n.ins[1])});"

    def store_shared(self, n: ir.Op, pending: List[_Group], pad: str) -> List[str]:
        """Registers → a shared tile every consumer warpgroup writes its rows of and an mma then reads
        whole: named barrier 3 on both sides (the earlier mma reading the tile has retired in every
        warpgroup; every warpgroup's rows are in), and a proxy fence so wgmma sees generic stores."""
        dst, src = n.outs[0], n.ins[0]
        if src.kind != "reg" or self.stored(dst) != (self.BM, self.stored(src)[1]):
            self._fail(f"store to shared tile {dst.name}: it must have the rows the warpgroups split, "
                       f"as {src.name} holds them", n)
        lines: List[str] = []
        # the registers are only read: an in-flight wgmma reading them too (dK += dSᵀ Q) may run on
        writers = [g.acc for g in pending if g.acc is src]
        if writers:
            self.wait_for(writers, pending, lines, pad)
        readers = [g.acc for g in pending if dst in g.reads]
        if readers:
            self.wait_for(readers, pending, lines, pad)
        if id(dst) in self.own_rows:
            # only this warpgroup's mma reads these rows again, and its last one on them has retired
            # (waited for above): its own four warps are all the barrier needs
            copy = "  // this block's copy (dsb)" if self.ds_stages == 2 else ""
            return lines + [
                f"{pad}store({self.var(dst)}, wg_row0, {self.var(src)});{copy}",
                f"{pad}arch::fence_proxy_async();  // generic-proxy stores, visible to wgmma's reads",
                f"{pad}arch::bar_sync(8 + cw, 128);  // this warpgroup's rows of {dst.name} are in (only it reads them)"]
        if self.ds_stages == 2:
            # the copy written now was last read by the mmas of two blocks back, which each warpgroup
            # waited for before it reached the last block's barrier: only the barrier after is needed
            return lines + [
                f"{pad}store({self.var(dst)}, wg_row0, {self.var(src)});  // this block's copy (dsb)",
                f"{pad}arch::fence_proxy_async();  // generic-proxy stores, visible to wgmma's reads",
                f"{pad}arch::bar_sync(3, CONSUMERS * 128);  // every warpgroup's rows of {dst.name} are in"]
        return lines + [
            f"{pad}arch::bar_sync(3, CONSUMERS * 128);  // every warpgroup's earlier mma on {dst.name} has retired",
            f"{pad}store({self.var(dst)}, wg_row0, {self.var(src)});",
            f"{pad}arch::fence_proxy_async();  // generic-proxy stores, visible to wgmma's reads",
            f"{pad}arch::bar_sync(3, CONSUMERS * 128);  // every warpgroup's rows of {dst.name} are in"]

    def reduce_add(self, n: ir.Op, pending: List[_Group], pad: str) -> List[str]:
        """store_add of a tile held transposed: each warpgroup writes its part (its rows as held, the
        tile's columns) into its own f32 staging tile in the logical orientation, and one thread adds
        it into global memory with a TMA reduce (FlashAttention-3's dQ). Named barrier 4 + cw orders
        the warpgroup's threads around the staging tile; the issuing thread waits for the previous
        reduce to have read it."""
        t, view = n.ins
        lines: List[str] = []
        self.wait_for([t], pending, lines, pad)
        stage = f"S.{self.reduces[id(n)]}[cw]"
        if self.reducer:
            return lines + [
                f"{pad}arch::bar_sync(4 + 2 * cw, 128 + 32);  // the reducer has read the staging tile's last contents",
                f"{pad}{self._stage_write(stage, t)}",
                f"{pad}arch::fence_proxy_async();  // generic-proxy stores, visible to the TMA unit",
                f"{pad}arch::bar_arrive(5 + 2 * cw, 128 + 32);  // full: the reducer adds it into {view.param.name}"]
        c = self.tma_coords(view, n.attrs["row"], n.attrs["col"])
        if t not in self.split_k:  # a warpgroup's part of a transposed tile: its columns
            c[0] = f"{c[0]} + wg_row0"
        m = self.maps[(id(view.param), t.rows)]
        return lines + self._staged(pad, "reduce", self._stage_write(stage, t),
                                    f"reduce_add_async(&{m}, {stage}, {', '.join(c)});")

    def _stage_write(self, stage: str, t: ir.Tile) -> str:
        if t in self.split_k:
            return f"store({stage}, {self.var(t)}, 0);  // this warpgroup's partial sum, whole"
        return f"store_transposed({stage}, {self.var(t)});"

    @staticmethod
    def _staged(pad: str, what: str, write: str, issue: str) -> List[str]:
        """A warpgroup's TMA write from its staging tile: `write` fills the tile (after the thread that
        issues waited for its last `what` to have read it), `issue` starts the copy, in a bulk group."""
        return [f"{pad}if (wg_thread() == 0) arch::tma_store_wait_read<0>();  // the last {what} has read the staging tile",
                f"{pad}arch::bar_sync(4 + cw, 128);  // named barrier 4 + cw: this warpgroup's 128 threads (1, 2: the turns)",
                pad + write,
                f"{pad}arch::fence_proxy_async();  // generic-proxy stores, visible to the TMA unit",
                f"{pad}arch::bar_sync(4 + cw, 128);",
                f"{pad}if (wg_thread() == 0) {{",
                f"{pad}  {issue}",
                f"{pad}  arch::tma_store_commit();",
                f"{pad}}}"]

    def store_tma(self, n: ir.Op, pending: List[_Group], pad: str) -> List[str]:
        """store of a 16-bit register tile through shared memory (option tma_store): each warpgroup
        writes its rows into its own swizzled staging tile and one thread stores it with TMA, which
        drops the rows past the tensor. Named barrier 4 + cw orders the warpgroup's threads around the
        staging tile; the issuing thread first waits for the last store to have read it."""
        t, view = n.ins
        lines: List[str] = []
        self.wait_for([t], pending, lines, pad)
        stage = f"S.{self.tma_stores[id(n)]}[cw]"
        c = self.tma_coords(view, n.attrs["row"], n.attrs["col"])
        at = view.param.rank - 1 - view.kept[0]  # the rows' coordinate, innermost axis first
        c[at] = f"{c[at]} + wg_row0"
        m = self.maps[(id(view.param), self.WG_ROWS)]
        return lines + self._staged(pad, "store", f"store({stage}, {self.var(t)}, 0);  // registers -> swizzled shared, "
                                    f"as {view.param.dtype.name}", f"store_async_4d({m}, {stage}, {', '.join(c)});")

    def reducer_lines(self, nodes, depth) -> List[str]:
        """Warp 1 of the producer warpgroup: the loops that hold a transposed store_add, and at each one,
        per consumer warpgroup, wait for its staging tile, add it into global memory with a TMA reduce
        (one lane), wait for the reduce to have read it and hand it back (named barriers 4 + 2w: empty,
        5 + 2w: full, 128 consumer threads + this warp)."""
        pad = "  " * depth
        lines = []
        for n in nodes:
            if isinstance(n, ir.Loop):
                if not any(isinstance(x, ir.Op) and id(x) in self.reduces for x in self.k.walk([n])):
                    continue
                i = self.sym_name(n.index)
                lines.append(f"{pad}for (int {i} = {self.expr(n.start)}; {i} < {self.expr(n.stop)}; ++{i}) {{")
                lines += self.reducer_lines(n.body, depth + 1)
                lines.append(f"{pad}}}")
            elif isinstance(n, ir.Op) and id(n) in self.reduces:
                t, view = n.ins
                c = self.tma_coords(view, n.attrs["row"], n.attrs["col"])
                if t not in self.split_k:  # warpgroup w's columns; a split-K partial sum covers the box
                    c[0] = "w * WG_ROWS" if c[0] == "0" else f"{c[0]} + w * WG_ROWS"
                m = self.maps[(id(view.param), t.rows)]
                lines += [f"{pad}// {ir.format_op(n)}",
                          f"{pad}for (int w = 0; w < CONSUMERS; ++w) {{",
                          f"{pad}  arch::bar_sync(5 + 2 * w, 128 + 32);  // warpgroup w's staging tile is full",
                          f"{pad}  if (arch::lane_id() == 0) {{",
                          f"{pad}    reduce_add_async(&{m}, S.{self.reduces[id(n)]}[w], {', '.join(c)});",
                          f"{pad}    arch::tma_store_commit();",
                          f"{pad}    arch::tma_store_wait_read<0>();",
                          f"{pad}  }}",
                          f"{pad}  __syncwarp();",
                          f"{pad}  arch::bar_arrive(4 + 2 * w, 128 + 32);  // ... and read: empty",
                          f"{pad}}}"]
        return lines

    def late_wait(self, pad: str, guard: bool) -> str:
        """Option kv_rings: the wait for the held stage's tile of the deferred mma (V), before the turn
        in which that mma is issued."""
        t = self.late_tile.name
        wait = f"wait(S.late.full[held], held_phase);  // {t} of the deferred mma has landed"
        return f"{pad}if (held >= 0) {wait}" if guard else pad + wait

    def deferred_mma(self, pad: str, pending: List[_Group], which: str, guard: bool = True) -> List[str]:
        """The loop's last mma, issued for the previous iteration (operands in the held stage). The
        group is committed even when there is none to issue, so that wait counts stay exact. In a
        peeled loop (option `peel`) the first iteration has none and the others always have one:
        no guard, and no group closed empty."""
        if self.peeling:
            return []
        self.wait_for(tiles_of(self.deferred), pending, [], pad)  # (never: checked in lower())
        call, g = self.mma_line(self.deferred, "held")
        pending.append(g)
        why = "issued late so it runs under the softmax" if which == "the previous iteration's" else "issued after the loop"
        return [f"{pad}// {ir.format_op(self.deferred)}  [{which}: {why}]",
                f"{pad}if (held >= 0) {call}" if guard else pad + call,
                f"{pad}mma_commit();"]

    def consumer_loop(self, n: ir.Loop, depth: int, pending: List[_Group]) -> List[str]:
        pad = "  " * depth
        lines: List[str] = []
        # the body is emitted once: retire what is in flight before it, then find the state the body
        # leaves behind (which the next iteration starts from) by running the analysis twice
        self.wait_for([g.acc for g in pending], pending, lines, pad)
        main = n is self.loop

        def body(state):
            self.early_released = False
            out = self.consumer(self.loop_body if main else n.body, depth + 1, state)
            if main:
                ip = pad + "  "
                if self.deferred is not None:
                    # everything of this stage but the deferred mma is done; keep the stage for it
                    self.wait_for([g.acc for g in state if g.stage is not None], state, out, ip, release=False)
                    phase = ", held_phase = pos.phase" if self.late_tile is not None else ""
                    out.append(f"{ip}held = pos.stage{phase};  // its {self.var(self.deferred.ins[1], 'held')[2:].split('[')[0]} "
                               "is read by the deferred mma next iteration")
                elif any(g.stage == "cur" for g in state):
                    for g in state:
                        if g.stage == "cur":
                            g.stage = "held"
                    out.append(f"{ip}held = pos.stage;  // still read by an in-flight wgmma: released when it retires")
                else:
                    out.append(f"{ip}release(S.ring.empty[pos.stage]);")
                out.append(f"{ip}pos.advance();")
                if self.ds_stages == 2:
                    out.append(f"{ip}dsb ^= 1;  // the next block writes the other copy of {', '.join(t.name for t in self.written)}")
            return out

        start, stop = self.bounds(n)
        if main and (self.early or self.ring_stores):  # the last iteration releases the early one-shot tiles
            lines.append(f"{pad}const int {self.sym_name(n.index)}_stop = {stop};")
            stop = self.loop_stop = f"{self.sym_name(n.index)}_stop"
        outer, self.in_loop_body = self.in_loop_body, main
        peel = main and self.peel
        first: List[_Group] = []
        if peel:  # the first iteration on its own, without the deferred mma
            self.peeling = True
            peeled = body(first)
            self.peeling = False
            body(first)
        else:
            body(first)
        state = [_Group(g.acc, g.a_reg, g.stage, g.reads) for g in first]
        text = body(state)
        self.in_loop_body = outer
        i = self.sym_name(n.index)
        if main and self.pingpong and self.deferred is not None:
            if not self.continuous:
                lines.append(f"{pad}if (cw == 1) arch::bar_arrive(1, 256);  // warpgroup 0 takes the first turn")
        elif main and self.pingpong:
            lines.append(f"{pad}if (cw == 1) arch::bar_sync(2, 256);  // warpgroup 0 takes the first turn")
        if main:
            first = {n.index.name: f"({start})"}
            for x in self.prefetch.values():  # the first iteration's copy
                lines.append(f"{pad}{self.vec_load(x, self.var(x.outs[0]) + '_next', first)}"
                             "  // prefetched: the loop loads each next one")
        if peel:
            lines.append(f"{pad}if ({start} < {stop}) {{  // the first iteration, peeled: no deferred mma before it")
            lines.append(f"{pad}  const int {i} = {start};")
            lines += peeled
            lines.append(f"{pad}}}")
            e = ir.as_expr(n.start)
            start = (f"{start} + 1" if self.split is not None and main else str(e.value + 1) if isinstance(e, ir.Const)
                     else f"{start} + 1" if isinstance(e, ir.Sym) else f"({start}) + 1")
        lines.append(f"{pad}for (int {i} = {start}; {i} < {stop}; ++{i}) {{")
        lines += text
        lines.append(f"{pad}}}")
        pending[:] = state
        if main and self.deferred is not None:
            if self.late_tile is not None:  # option kv_rings
                lines.append(self.late_wait(pad, guard=True))
            if self.pingpong:
                lines.append(f"{pad}arch::bar_sync(1 + cw, 256);  // my turn on the tensor cores")
            lines += self.deferred_mma(pad, pending, "the last iteration's")
            if self.pingpong and self.continuous:
                lines.append(f"{pad}arch::bar_arrive(2 - cw, 256);  // the other warpgroup's turn (warpgroup 0: its next "
                             "program's first), while this one finishes")
            elif self.pingpong:
                lines.append(f"{pad}if (cw == 0) arch::bar_arrive(2, 256);  // warpgroup 1's last turn")
        elif main and self.pingpong:
            lines.append(f"{pad}if (cw == 0) arch::bar_arrive(2, 256);  // warpgroup 1's last turn")
        if main:
            for t in self.quad_sums:
                lines.append(f"{pad}row_sum_finish({self.var(t)});  // the quad's four lanes' parts of each row's sum")
            self.wait_for([g.acc for g in pending], pending, lines, pad, keep_held=bool(self.ring_stores))
        if depth == 0 and self.persistent and any(x is self.loop for x in self.k.walk([n])):
            # the top-level statement that holds the pipelined loop: the one-shot tiles are read no more
            self.wait_for([g.acc for g in pending], pending, lines, pad)
            for i, o in enumerate(self.once):
                if id(o.outs[0]) in self.resident_only:
                    continue  # released when it was loaded into registers
                if id(o.outs[0]) in self.early:
                    lines.append(f"{pad}if ({self.loop_stop} <= {self.bounds(self.loop)[0]}) release(S.once_empty[{i}]);  "
                                 f"// no iteration released {o.outs[0].name}")
                else:
                    lines.append(f"{pad}release(S.once_empty[{i}]);  // {o.outs[0].name} is read no more this tile")
        return lines

    def vec_coords(self, n: ir.Op) -> List[str]:
        """Coordinates of a vector window's box, innermost axis first, padded to rank 4."""
        view = n.ins[0]
        out = [self.expr(n.attrs["row"]) if a == view.kept[0] else self.expr(view.index[a])
               for a in reversed(range(view.param.rank))]
        return out + ["0"] * (4 - len(out))

    # ------------------------------------------------------------------ rendering
    def lower(self) -> Lowered:
        self.analyse()
        # zero_past_stops bounds the pipelined loop's loads, zero_past_stop_once the one-shot ones, extent() the
        # register stores
        for n in self.k.walk():
            stopped = [v for v in getattr(n, "ins", ()) if isinstance(v, ir.View) and v.stops]
            if stopped and not (n.name == "load_async" or n.name == "store" and n.ins[0].kind in ("reg", "vec")):
                self._fail(f"{n.name} through {stopped[0].text()}: a window stopped short is bounded here only "
                           "where a load_async brings it to shared memory or a register tile or vector is stored "
                           "through it", n)
        self.plan_resident()
        k = self.k
        self.consumer_regs = 240 if self.consumers <= 2 else 160  # setmaxnreg of a consumer warpgroup
        self.producer_regs = 24 if self.consumers <= 2 else 32
        if self.reducer and self.persistent and self.consumers == 2:
            # a reducer warp walking the programs beside the loads: at 24 registers ptxas spilled the
            # causal walk's constants. 16 more for the producer warpgroup are 8 fewer a consumer thread,
            # within the CTA's 168 x 384 (the template's static_assert; setmaxnreg takes multiples of 8)
            self.producer_regs, self.consumer_regs = 40, 232
        self.hoisted: List[ir.Op] = []
        self.plan_hoist()
        loop_mmas = [x for x in self.loop_body if isinstance(x, ir.Op) and x.name == "mma"]
        self.turn_arrive = self.turn_sync = None
        self.plan_rotation(loop_mmas)
        if self.hoisted and "hoist" not in self.options and self.loop_registers() > self.consumer_regs - 32:
            # both overlaps would keep too many tiles in flight (ptxas spills): keep the rotation only
            self.hoisted, self.loop_body = [], list(self.loop.body)
            loop_mmas = [x for x in self.loop_body if isinstance(x, ir.Op) and x.name == "mma"]
            self.plan_rotation(loop_mmas)
        if self.interleave and self.deferred is None:
            self._fail("Interleave overlaps each warpgroup's wgmmas with its vector work by issuing the loop's "
                       "last mma in the next iteration, and this loop's last mma cannot move there (option "
                       "rotate=False, fewer than two mma, or an op between them touches its tiles); declare "
                       "Pipelined or ProducerConsumer")
        # the rotated loop's first iteration emitted on its own (option `peel`; on for dK/dV at D = 64,
        # SCHEDULES): the other iterations then issue the deferred mma unguarded, and ptxas has no
        # group to close empty
        self.peel = bool(self.options.get("peel", False)) and self.deferred is not None
        self.peeling = False
        self.plan_fold()
        self.plan_quad_sums()
        self.plan_prefetch()
        self.plan_early_release()
        for tid in self.resident_only:  # released once in registers, before the loop
            self.early.pop(tid, None)
        self.plan_window()
        self.plan_split()
        self.plan_ring_store()
        self.plan_kv_rings()
        # PingPong with the rotation: the turns run on across the loop's runs and programs (the first is
        # handed to warpgroup 0 once, before the first program): warpgroup 0 starts its next program's
        # first mma while warpgroup 1 issues its last one and finishes, instead of after warpgroup 1's
        # epilogue. Option continuous_turns=False: turns start afresh with every run of the loop.
        self.continuous = self.continuous_turns()
        pre = ["if (cw == 1) arch::bar_arrive(1, 256);  // warpgroup 0 takes the first turn"] if self.continuous else []
        post = ["if (cw == 0) arch::bar_sync(1, 256);  // warpgroup 1's last hand-over: no barrier left half-arrived"
                ] if self.continuous else []
        self.in_loop_body = False
        if self.pingpong:
            if self.consumers != 2 or len(loop_mmas) < 2:
                self._fail("PingPong takes two consumer warpgroups and at least two mma in the pipelined loop")
            if self.deferred is not None:  # a turn = this iteration's first mma + the deferred one
                self.turn_sync, self.turn_arrive = loop_mmas[0], loop_mmas[0]
            else:  # a turn = the last mma + the next iteration's first
                self.turn_arrive, self.turn_sync = loop_mmas[0], loop_mmas[-1]
        decls = []
        for t in k.tiles:
            if t.kind == "reg" and t in self.flipped:
                decls.append(f"rt<{CTYPE[t.dtype.name]}, WG_ROWS, {t.rows}> {self.var(t)};  // {t.type_str()}, "
                             f"held transposed ({t.cols}x{t.rows})")
            elif t.kind == "reg" and t in self.split_k:
                decls.append(f"rt<{CTYPE[t.dtype.name]}, {t.rows}, {t.cols}> {self.var(t)};  // {t.type_str()}, "
                             "this warpgroup's share of a sum over the split rows")
            elif t.kind == "reg":
                decls.append(f"rt<{CTYPE[t.dtype.name]}, WG_ROWS, {t.cols}> {self.var(t)};  // {t.type_str()}")
            elif t.kind == "vec" and t in self.flipped:
                decls.append(f"cv<{t.rows}> {self.var(t)};  // {t.type_str()}, along the columns of the transposed tiles")
            elif t.kind == "vec":
                decls.append(f"rv<WG_ROWS> {self.var(t)};  // {t.type_str()}")
            if id(t) in self.resident:
                decls.append(f"rt<{CTYPE[t.dtype.name]}, WG_ROWS, {t.cols}> {self.resident[id(t)]};  // {t.name}'s rows "
                             "of this warpgroup, an A operand held in registers (option resident)")
            if any(x.outs[0] is t for x in self.prefetch.values()):
                kind = decls[-1].split(f" {self.var(t)};")[0]
                decls.append(f"{kind} {self.var(t)}_next;  // the next iteration's {t.name}, loaded ahead")
        if self.ring_stores:
            decls.append("int staged = -1;  // a ring stage an O store may still read (option ring_store)")
        if self.ds_stages == 2:
            decls.append("int dsb = 0;  // which copy of " + ", ".join(t.name for t in self.written) + " this block writes")
        consumer = self.consumer(k.body, 0, [])
        producer = self.producer(k.body, 0)
        reducer = self.reducer_lines(k.body, 0) if self.reducer else []
        shared = []
        once = {id(o.outs[0]) for o in self.once}
        for t in k.tiles:
            if t.kind == "shared":
                two = self.ds_stages == 2 and t in self.written
                n = "[STAGES]" if t in self.ring else "[2]" if two else ""
                r, c = self.stored(t)
                # what the C++ type does not say: how the tile is used (its IR type is the same st<...>)
                role = ("one a ring stage" if t in self.ring else "two copies, written in turn" if two
                        else "loaded once a program" if id(t) in once else "")
                how = f"held transposed ({r}x{c})" if t in self.flipped else ""
                note = "; ".join(x for x in (role, how) if x)
                shared.append(f"st<{CTYPE[t.dtype.name]}, {r}, {c}> {self.var(t)[2:].split('[')[0]}{n};"
                              + (f"  // {t.name}: {note}" if note else ""))
        for o in [x for x in k.walk() if isinstance(x, ir.Op) and id(x) in self.reduces]:
            t = o.ins[0]
            part = (f"each consumer warpgroup's partial {t.name}" if t in self.split_k
                    else f"{t.name}'s columns of each consumer warpgroup")
            cols = t.cols if t in self.split_k else "WG_ROWS"
            shared.append(f"st<float, {t.rows}, {cols}> {self.reduces[id(o)]}[CONSUMERS];  // "
                          f"{part}, for the TMA reduce into {o.ins[1].param.name}")
        for n in [x for x in self.loop.body if isinstance(x, ir.Op) and id(x) in self.vec_tma]:
            shared.append(f"sv<{n.outs[0].rows}> {self.vec_tma[id(n)]}[STAGES];  // {n.outs[0].name}'s window of "
                          f"{n.ins[0].param.name} in each ring stage")
        for o in [x for x in k.walk() if isinstance(x, ir.Op) and id(x) in self.tma_stores]:
            t, P = o.ins[0], o.ins[1].param
            shared.append(f"st<{CTYPE[P.dtype.name]}, WG_ROWS, {t.cols}> {self.tma_stores[id(o)]}[CONSUMERS];  // "
                          f"each consumer warpgroup's rows of {t.name}, for the TMA store into {P.name}")
        if self.tma_stores or self.ring_stores:  # the stores have read shared memory before the CTA exits
            post.append("if (wg_thread() == 0) arch::tma_store_wait<0>();  // this warpgroup's TMA stores are done")
        if self.reducer:  # the reducer's last reads of the staging tiles, before the CTA exits
            post.append("arch::bar_sync(4 + 2 * cw, 128 + 32);  // the reducer has read the last staging tile")
        elif self.reduces:  # a program's reduces have read shared memory before the CTA moves on or exits
            consumer.append("if (wg_thread() == 0) arch::tma_store_wait<0>();  // the program's reduces are done")
        params = []
        for m, (P, rows, _) in self.map_info.items():
            params.append(("tma", m, P, rows))
        for m, (P, rows) in self.vec_maps.items():
            params.append(("tma_vec", m, P, rows))
        writes = ("store", "store_add")
        ptr_params = [P for P in k.params if P in k.reads or any(
            isinstance(n, ir.Op) and n.name in ("load",) + writes and id(n) not in self.vec_tma
            and any(isinstance(x, ir.View) and x.param is P for x in n.ins) for n in k.walk())]
        sig = [f"const __grid_constant__ tma_map {m}" for _, m, _, _ in params]
        for P in ptr_params:
            const = "" if any(isinstance(n, ir.Op) and n.name in writes and n.ins[1].param is P for n in k.walk()) else "const "
            sig.append(f"{const}{CTYPE[P.dtype.name]}* __restrict__ {P.name}")
        sizes = [(f"int {self.sym_name(d)}", ("dim", d)) for P in k.params for d in P.dims]
        sizes += [(f"long long {self.sym_name(st)}", ("stride64", st)) for P in k.params for st in P.strides]
        sig += [decl for decl, _ in sizes]
        sig += [f"float {self.sym_name(s)}" for s in k.scalars]
        if self.split is not None:  # the launcher's plan: whole programs, then parts (tiles/split.h)
            sig += ["float* __restrict__ split_ws", "int split_whole", "int split_parts"]
        split_bounds = []
        if self.split is not None:
            i = self.sym_name(self.loop.index)
            split_bounds = [f"int {i}_begin = {self.expr(self.loop.start)}, {i}_end = {self.expr(self.loop.stop)};",
                            f"if (part >= 0) split_range({i}_begin, {i}_end, part, split_parts);  "
                            "// a part: its share of the key blocks"]
        BM = self.BM
        tags = [(f"wd{self.wide_stores}", self.wide_stores), ("ra", bool(self.resident)), ("pp", self.pingpong),
                ("rot", self.deferred is not None), ("h", self.hoisted), ("np", not self.persistent), ("f", self.fold),
                ("qs", bool(self.quad_sums)), ("w", self.window_bytes),
                ("t", self.tree_max), ("pf", bool(self.prefetch)), ("d2", self.ds_stages == 2), ("r", self.reducer),
                ("ws", self.options.get("whole_tile_stores", False)), ("pl", self.peel), ("ts", bool(self.tma_stores)),
                ("rs", bool(self.ring_stores)), ("kv", self.late_tile is not None),
                ("nsm", not self.options.get("stmatrix", True)), ("vt", bool(self.vec_tma)),
                ("st", self.split is not None), ("rd", bool(k.reads))]
        meaning = {"ra": "resident A operands", "pp": "PingPong turns", "rot": "rotated loop", "h": "hoisted mma",
                   "np": "one CTA a program", "f": "scale folded into the exponent", "qs": "quad row sums",
                   "w": "L2 windows", "t": "tree maximum", "pf": "vectors prefetched", "d2": "two dS copies",
                   "r": "reducer warp", "ws": "whole-tile stores", "pl": "first iteration peeled",
                   "ts": "TMA store", "rs": "ring_store", "kv": "K and V rings", "nsm": "no stmatrix", "vt": "vectors by TMA",
                   "st": "split tail", "rd": "sizes read from a tensor (k.read)"}
        legend = [f"s{self.stages} = {self.stages} stages", f"c{self.consumers} = {self.consumers} consumer warpgroups"]
        legend += [f"{t} = {meaning.get(t, f'{self.wide_stores} pairs a store')}" for t, on in tags if on]
        name = "tiles_{}_hopper_{}_{}_s{}c{}{}".format(
            k.name, "_".join(f"{a}{int(v) if isinstance(v, bool) else v}" for a, v in k.constexprs.items()),
            k.params[0].dtype.name, self.stages, self.consumers, "".join(t for t, on in tags if on))
        ctx = dict(name=name, ir_text=k.text(), ir_name=k.name, pattern=k.pattern.describe(), BM=BM,
                   WG_ROWS=self.WG_ROWS, consumers=self.consumers, stages=self.stages, pingpong=self.pingpong,
                   interleave=self.interleave, declared_stages=k.pattern.stages, legend=", ".join(legend),
                   n_once=max(1, len(self.once)), shared=shared, sig=sig, decls=decls, producer=producer, reducer=reducer,
                   whole_tile_stores=self.options.get("whole_tile_stores", False), wide_stores=self.wide_stores,
                   stmatrix=bool(self.options.get("stmatrix", True)), smem_bytes=self.smem_bytes,
                   late=self.late_tile.name if self.late_tile is not None else None,
                   consumer=consumer, consumer_pre=pre, consumer_post=post, maps=[m for _, m, _, _ in params],
                   producer_regs=self.producer_regs, consumer_regs=self.consumer_regs,
                   grid=[self.expr(g) for g in k.grid], persistent=self.persistent,
                   order=self.order, reverse=self.reverse, window=self.window_bytes is not None,
                   window_bytes=self.window_bytes, window_mb=WINDOW_MB, window_note=self.window_note,
                   uniform_warpgroup=bool(self.options.get("uniform_warpgroup", True)),
                   split=self.split, split_bounds=split_bounds,
                   let_lines=self.declarations(RESERVED | {"tile", "part", "units", "kb_stop", "kb_begin", "kb_end"}),
                   transposed=", ".join(t.name for t in k.tiles if t.kind == "reg" and t in self.flipped),
                   col_vectors=", ".join(t.name for t in k.tiles if t.kind == "vec" and t in self.flipped))
        src = self.env.get_template("attention.cu.j2").render(**ctx)
        # the sizes and strides the code reads (those of tensors read through TMA maps mostly are not):
        # the others leave the signature and the launch's arguments alike, and the source is rendered again
        kernels = 2 if self.split is not None else 1  # the merge kernel repeats the signature
        unread = {decl for decl, _ in sizes if len(re.findall(rf"\b{decl.split()[-1]}\b", src)) <= kernels}
        if unread:
            sizes = [(decl, a) for decl, a in sizes if decl not in unread]
            ctx["sig"] = sig = [x for x in sig if x not in unread]
            src = self.env.get_template("attention.cu.j2").render(**ctx)
        args = [("tma", m, P, rows, kept_row) for m, (P, rows, kept_row) in self.map_info.items()]
        args += [("tma_vec", m, P, rows) for m, (P, rows) in self.vec_maps.items()]
        args += [("ptr", P) for P in ptr_params]
        args += [a for _, a in sizes]
        args += [("f32", s) for s in k.scalars]
        if self.split is not None:
            args += [("split_ws",), ("split_whole",), ("split_parts",)]
        return Lowered(kernel=k, backend="hopper", arch=self.arch, entry=name, source=src,
                       block=(128 * (1 + self.consumers), 1, 1), shared_bytes=self.smem_bytes, args=args,
                       headers=header_files(str(runtime.INCLUDE_DIR)),
                       notes={"grid": k.grid, "template_version": runtime.TEMPLATE_VERSION,
                              "persistent": self.persistent, "positive": self.positive,
                              "window": self.window_bytes is not None,
                              "consumers": self.consumers, "stages": self.stages,
                              "split": None if self.split is None else {
                                  "rows": self.BM, "cols": self.split["cols"], "merge": name + "_merge"}})
