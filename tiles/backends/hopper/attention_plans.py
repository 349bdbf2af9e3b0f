"""The schedule choices the attention IR leaves to the Hopper backend. Each is a lowering option of the
same name (benchmarks and SCHEDULES set them; an option turns its choice off, or on where it is off by
default). The plan_* steps here decide the larger ones once per lowering, before any C++ is written
(WarpSpecializedLowering.lower calls them in order); the rest are read where they are emitted.

* `rotate`: the loop's last mma (O += P V) is issued in the next iteration, right after the first,
  when no op in between touches its tiles (FA3's intra-warpgroup overlap: it runs under the softmax).
* `hoist`: an mma whose operands are ready is issued right after the loop's first mma (the backward's
  dP = dO Vᵀ then runs under the softmax), unless the tiles it would keep in flight exceed the
  consumers' registers (`loop_registers`; ptxas would spill).
* `stages` deepens the ring past the declared depth while shared memory allows (up to 4).
* `persistent`: one CTA per SM walks the programs (program 0 slowest, from its heavy end, when the
  loop's trip count depends on a program id, so rounds hold equal work). `order` and `reverse` set
  the walk's order outright: a packed launch walks its table of blocks (heaviest first) in order.
* `window` walks such a grid instead in pairs of programs of equal work (program 0's heavy and light
  ends), in windows of heads whose streamed tiles fit in L2 (plan_window).
* `fold` moves the softmax's scale into its exponent, `mul` + `row_max` + `sub_row` + `exp2` → one
  FFMA and one EX2 an element, exact for a positive scale, which every launch checks (plan_fold).
* `early_release` frees a one-shot tile (Q) in the loop's last iteration, so the next program's copy
  loads under this one's last softmax and epilogue.
* `continuous_turns` keeps PingPong's turns running across programs.
* `uniform_warpgroup` hands the consumer warpgroup's index through a warp shuffle, so ptxas sees it is
  the same in every lane and keeps the wgmma descriptors built from it in uniform registers (else it
  builds them in vector registers and copies each back before its wgmma).
* `tree_max` takes the softmax's row maximum as a tree (ops.h `row_max_tree`, the same bits) instead of
  a chain, to shorten the wait from S to the exp2 (the longest FMNMX chain 18 -> 7).
* `prefetch` loads the main loop's vectors (the backward's LSE and Delta) one iteration ahead.
* `ds_stages` keeps the shared tiles the consumers write (attention_bwd_fused's dS) in two copies, with
  one barrier a block.
* `reducer` hands a transposed store_add's TMA reduce to warp 1 of the producer warpgroup.
* `whole_tile_stores` (off; on for dK/dV in SCHEDULES) stores a tile that lies wholly inside its tensor
  without testing each pair (ops.h).
* `wide_stores` = 2 (the default) or 4 stores that many pairs of a row at once, after the lanes of a
  quad swap them (ops.h store_wide; 0: a pair a store).
* `peel` (on for dK/dV at D = 64 and the forward at D = 128) emits the rotated loop's first iteration
  on its own.
* `stmatrix` (on) stores 16-bit register tiles to shared memory (the fused backward's dS; ring_store's
  staged O, from f32, by ops.h `store_stmatrix`) four pairs an instruction (ops.h `store`; off: a pair
  a st.shared).
* `vec_tma` (on for the backward's dK/dV and fused kernels, SCHEDULES / schedule) brings the loop's
  column vectors (LSE, Delta) into each ring stage by the producer thread's TMA instead of every
  consumer thread's global loads (plan_vec_tma).
* `resident` (on for dK/dV and fused at D = 64, dQ at D = 128) holds a one-shot A operand (K, V; Q, dO)
  in registers, loaded once a program, so its wgmmas read only B from shared memory (plan_resident).
* `quad_sums` (on) keeps the loop's running row sum (the softmax's denominator) as each lane's part and
  adds a quad's parts once, after the loop (plan_quad_sums).
* `split_tail` walks the persistent grid's last partial wave in parts of the key loop, merged by a
  second kernel (plan_split, tiles/split.h).
* `ring_store` (the D = 128 forward, RING_STORE_QUERIES) stores the tile written after the loop (O) by
  TMA from the last iteration's ring stage, carved out of its K tile (plan_ring_store).

bench/hopper_notes.md has the measurements behind each default.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

from tiles.core import ir

CTYPE = {"bf16": "bf16", "f16": "f16", "f32": "float", "i32": "int"}
WINDOW_MB = 16  # L2 a window of heads may fill (the H200 has 50 MB, in two halves; others' data shares it)


def tiles_of(op: ir.Op) -> List[ir.Tile]:
    return [x for x in op.outs + op.ins if isinstance(x, ir.Tile)]


class SchedulePlans:
    """The plan_* steps of WarpSpecializedLowering: they read the analysed kernel (self.loop,
    self.ring, self.consumers, ...) and record what the emitters then follow."""

    def plan_vec_tma(self) -> None:
        """Option vec_tma: the pipelined loop's column vectors (the backward's LSE and Delta of the
        query block) come into each ring stage by TMA, issued by the producer thread with the stage's
        tiles and counted on its full barrier, and the consumers read them from shared memory
        (FlashAttention-3's LSE and dPsum). Otherwise every consumer thread loads them from global
        memory, a block ahead (`prefetch`), and its proxy fences then wait for those loads (session 21).
        The window is one unswizzled box along the tensor's last axis; the launch pads a tensor whose
        rows are not 16-byte aligned (WarpSpecializedLowering._prepare)."""
        self.vec_tma: Dict[int, str] = {}
        self.vec_maps: Dict[str, Tuple[ir.Param, int]] = {}
        if not self.options.get("vec_tma", False):
            return
        waited = False
        for n in self.loop.body:
            if isinstance(n, ir.Op) and n.name == "wait":
                waited = True
            if not (isinstance(n, ir.Op) and n.name == "load" and n.outs[0].kind == "vec"
                    and isinstance(n.ins[0], ir.View) and n.ins[0].rank == 1
                    and self.loop.index in ir.symbols(ir.as_expr(n.attrs["row"]))):
                continue
            t, view = n.outs[0], n.ins[0]
            P = view.param
            if (t not in self.flipped or P.dtype.name != "f32" or not waited or P.rank > 4
                    or view.kept[0] != P.rank - 1 or t.rows % 4 or t.rows > 256):
                self._fail(f"option vec_tma: {t.name} must be an f32 column vector (along the columns of tiles "
                           "held transposed) of at most 256 elements, a multiple of 4, loaded along its tensor's "
                           "last axis after the loop's wait", n)
            key = (id(P), t.rows)
            if key in self.maps:
                self._fail(f"option vec_tma: {P.name} is also read as a tile", n)
            self.maps[key] = f"map_{P.name}"
            self.vec_maps[self.maps[key]] = (P, t.rows)
            self.vec_tma[id(n)] = f"{t.name}_s"
        if not self.vec_tma:
            self._fail("option vec_tma: the pipelined loop loads no column vector")

    def plan_resident(self) -> None:
        """Option `resident`: a one-shot shared tile that is the untransposed A operand of mmas in the
        pipelined loop is also held in registers (its warpgroup's rows, loaded once a tile after its
        wait), and those wgmmas read A from there: each then reads only its B operand from shared
        memory, where an SS wgmma of N = 64 reads as many bytes of A as of B (FlashAttention-3's
        V_in_regs, for K as well). A tile read by nothing else is released as soon as it is in
        registers, so the producer loads the next program's copy under this one."""
        self.resident: Dict[int, str] = {}  # id(shared tile) -> its register copy
        self.resident_only: set = set()  # ids of those nothing reads from shared memory after the load
        which = self.options.get("resident", False)  # True: every such tile; a str: these, comma-separated
        if not which:
            return
        names = None if which is True else set(str(which).split(","))
        once = {id(o.outs[0]): o.outs[0] for o in self.once}
        loop_ops = {id(x) for x in self.k.walk([self.loop])}
        readers: Dict[int, list] = {}
        for x in self.k.walk():
            if isinstance(x, ir.Op) and x.name != "load_async":
                for t in x.ins:
                    if isinstance(t, ir.Tile) and id(t) in once:
                        readers.setdefault(id(t), []).append(x)
        for tid, t in once.items():
            if (t.dtype.name not in ("bf16", "f16") or self.stored(t)[0] != self.BM or t in self.flipped
                    or names is not None and t.name not in names):
                continue
            uses = []
            for x in readers.get(tid, []):
                if x.name != "mma" or id(x) not in loop_ops or x.outs[0] in self.split_k:
                    continue
                wa, wa_t, _, _ = self.wgmma_operands(x)
                if wa is t and not wa_t:
                    uses.append(x)
            if uses:
                self.resident[tid] = f"{t.name}_a"
                if len(uses) == len(readers[tid]):
                    self.resident_only.add(tid)

    def plan_hoist(self) -> None:
        """Issue order of the main loop body (self.loop_body). With the `hoist` option (default on),
        an mma whose operands are ready right after the loop's first mma moves up to follow it, so it
        runs on the tensor cores while the registers work on the first one's result (attention's
        backward: dP = dO Vᵀ overlaps the softmax that makes P from S). Legal when no op in between
        writes a tile it reads, or touches the tile it writes."""
        body = list(self.loop.body)
        self.loop_body = body
        mmas = [x for x in body if isinstance(x, ir.Op) and x.name == "mma"]
        if not self.options.get("hoist", True) or len(mmas) < 3:
            return
        for m in mmas[1:-1]:
            f, j = body.index(mmas[0]), body.index(m)
            reads = {t for t in m.ins if isinstance(t, ir.Tile)}
            if m.attrs.get("accumulate", True):
                reads.add(m.outs[0])
            between = body[f + 1:j]
            if any(not isinstance(x, ir.Op) or x.name == "wait" for x in between):
                continue
            if any(set(x.outs) & reads or m.outs[0] in tiles_of(x) for x in between):
                continue
            body.remove(m)
            # after the first mma and any mma hoisted before this one
            at = f + 1
            while at < len(body) and body[at] in self.hoisted:
                at += 1
            body.insert(at, m)
            self.hoisted.append(m)

    def loop_registers(self) -> int:
        """A consumer thread's registers for the tiles the main loop's schedule keeps live at once
        (a lower bound that leaves the scalars out): the accumulators that persist across iterations,
        the first mma's accumulator, the hoisted ones in flight under the elementwise ops, the
        register A operands of the loop's mmas (the deferred mma's stays pinned until it retires)."""
        def regs(t):
            r, c = self.stored(t)
            return self.WG_ROWS * c * t.dtype.bytes // 4 // 128
        ops = [x for x in self.loop_body if isinstance(x, ir.Op)]
        mmas = [x for x in ops if x.name == "mma"]
        written = {t for x in ops if x.name != "mma" for t in x.outs}
        resident = {m.outs[0] for m in mmas if m.attrs.get("accumulate", True) and m.outs[0] not in written}
        live = resident | {mmas[0].outs[0]} | {m.outs[0] for m in self.hoisted}
        live |= {m.ins[0] if m.ins[0].kind == "reg" else m.ins[1] for m in mmas
                 if any(t.kind == "reg" for t in m.ins)}
        return sum(regs(t) for t in live if t.kind == "reg") + sum(
            regs(o.outs[0]) for o in self.once if id(o.outs[0]) in self.resident)

    def plan_rotation(self, mmas) -> None:
        """Software-pipeline the main loop (FA3's intra-warpgroup overlap): its last mma is issued in
        the next iteration right after the first one, so it runs under that iteration's softmax.
        Legal when no op between the two positions touches its tiles."""
        self.deferred = self.deferred_after = None
        if not self.options.get("rotate", True) or len(mmas) < 2:
            return
        body = self.loop_body
        last, first = mmas[-1], mmas[0]
        tiles = set(tiles_of(last)) - {t for t in tiles_of(last) if t.kind == "shared"}
        after = body[body.index(last) + 1:]
        before = body[:body.index(first) + 1]
        touched = [t for x in after + before if isinstance(x, ir.Op) and x.name != "wait" for t in tiles_of(x)]
        if any(t in tiles for t in touched) or any(isinstance(x, ir.Loop) for x in body):
            return
        if not any(t in self.ring for t in last.ins):
            return
        self.deferred, self.deferred_after = last, first

    def plan_fold(self) -> None:
        """FlashAttention-3's softmax arithmetic. In the main loop, `mul(s, s, c)` followed (past masks
        to -inf and a `row_max(m, s, init)`) by `sub_row(s, s, v)`, `exp2(s, s)` becomes one FFMA and
        one EX2 an element (ops.h `exp2_scaled_row`), and the row maximum is taken before scaling and
        scaled once a row (`row_max_scaled`): one FMUL an element less. Exact only for c > 0, so the
        lowering records c (Lowered.notes["positive"]) and the launcher lowers without the fold
        (option fold=False) when c ≤ 0 at a launch."""
        self.fold: Dict[int, tuple] = {}
        self.positive: List[object] = []
        if not self.options.get("fold", True):
            return
        body = self.loop_body
        for i, n in enumerate(body):
            if not (isinstance(n, ir.Op) and n.name == "mul" and n.outs[0].kind == "reg"
                    and n.ins[0] is n.outs[0] and not isinstance(n.ins[1], ir.Tile)):
                continue
            s, c = n.outs[0], n.ins[1]
            plan = {}
            for j in range(i + 1, len(body) - 1):
                x = body[j]
                if not isinstance(x, ir.Op) or x in self.hoisted or x is self.deferred:
                    if isinstance(x, ir.Op) and s not in tiles_of(x):
                        continue  # an mma issued early that does not touch s
                    break
                if x.name in ("mask_cols", "mask_rows", "mask_causal", "mask_window") and x.outs[0] is s:
                    v = x.attrs["value"]
                    if isinstance(v, ir.Const) and v.value == -math.inf:
                        continue
                    break
                if x.name == "row_max" and len(x.ins) == 2 and x.ins[0] is s:
                    plan[id(x)] = ("row_max_scaled", c)
                    continue
                e = body[j + 1]
                if (x.name == "sub_row" and x.ins[0] is s and x.outs[0] is s and isinstance(e, ir.Op)
                        and e.name == "exp2" and e.ins[0] is s and e.outs[0] is s):
                    plan[id(x)] = ("exp2_scaled", c)
                    plan[id(n)] = ("skip", "the exp2_scaled below")
                    plan[id(e)] = ("skip", "the exp2_scaled above")
                    self.fold.update(plan)
                    self.positive.append(c)
                    break
                if s in tiles_of(x):
                    break

    def plan_quad_sums(self) -> None:
        """Option quad_sums (on): a running row sum of the main loop, `row_sum(l, s, l)`, is kept in each
        lane as the sum of the lane's own columns (ops.h row_sum_partial), and the four lanes of a quad
        that hold a row are added once, after the loop (row_sum_finish): the two shuffles and two adds a
        row leave every block. It holds where l starts at 0 (a `fill` before the loop) and the loop
        touches l only with that row_sum and with `mul(l, l, x)`, x a row vector or a constant, which
        scales every lane's part alike. Another order of the same sum: the result changes in its
        rounding. H200, session 29 (bench/attention_rowsum_edits.py `quad_end`, D = 128, non-causal,
        the kernel alone): 0.999 / 1.009 / 1.007x the launched forward at S = 1k / 4k / 16k."""
        self.quad_sums: List[ir.Tile] = []
        if not self.options.get("quad_sums", True) or not any(n is self.loop for n in self.k.body):
            return  # (a loop inside another would run on from a finished sum in the outer one's next turn)
        ops = [x for x in self.k.walk() if isinstance(x, ir.Op)]
        inside = {id(x) for x in self.k.walk([self.loop]) if isinstance(x, ir.Op)}
        first = next((i for i, x in enumerate(ops) if id(x) in inside), len(ops))

        def allowed(x: ir.Op, v: ir.Tile, i: int) -> bool:
            if id(x) in inside:
                return (x.name == "mul" and x.outs[0] is v and x.ins[0] is v
                        and (not isinstance(x.ins[1], ir.Tile) or (x.ins[1].kind == "vec" and x.ins[1] is not v)))
            if i > first:
                return True  # after the loop: the quad's sum is finished by then
            val = x.attrs.get("value") if x.name == "fill" else None
            return val is not None and float(val.value if isinstance(val, ir.Const) else val) == 0.0

        for n in ops:
            if not (id(n) in inside and n.name == "row_sum" and len(n.ins) == 2 and n.ins[1] is n.outs[0]):
                continue
            v = n.outs[0]
            if v.kind != "vec" or v in self.flipped or v in self.quad_sums:
                continue
            if all(allowed(x, v, i) for i, x in enumerate(ops) if x is not n and v in tiles_of(x)):
                self.quad_sums.append(v)

    def plan_prefetch(self) -> None:
        """Vector loads in the main loop (the backward's LSE and Delta of the query block) are issued
        one iteration ahead into a second copy (`prefetch`, default on): the global load then has a
        whole iteration to arrive instead of the one GEMM before its first use. The last iteration
        loads one block past the loop's end, bounded like every load (rows past the tensor read 0)."""
        self.prefetch: Dict[int, ir.Op] = {}
        if not self.options.get("prefetch", True):
            return
        for n in self.loop_body:
            if (isinstance(n, ir.Op) and n.name == "load" and n.outs[0].kind == "vec" and isinstance(n.ins[0], ir.View)
                    and n.ins[0].rank == 1 and self.loop.index in ir.symbols(ir.as_expr(n.attrs["row"]))
                    and id(n) not in self.vec_tma):
                self.prefetch[id(n)] = n

    def plan_early_release(self) -> None:
        """One-shot tiles read only by the main loop's mmas that also read a ring stage (so each
        such wgmma retires within its iteration) are released in the loop's last iteration, right
        after the last one retires, instead of after the loop: the producer loads the next program's
        copy under this program's last softmax and epilogue (persistent kernels only). A loop with
        no iterations releases after it, as before."""
        self.early: Dict[int, int] = {}  # id(one-shot tile) -> its once_empty barrier
        if not self.options.get("early_release", True) or not self.persistent or self.loop not in self.k.body:
            return
        ops = [x for x in self.k.walk() if isinstance(x, ir.Op)]
        for i, o in enumerate(self.once):
            t = o.outs[0]
            readers = [x for x in ops if x is not o and t in tiles_of(x)]
            if readers and all(x.name == "mma" and x in self.loop_body and any(r in self.ring for r in x.ins)
                               for x in readers):
                self.early[id(t)] = i

    def plan_window(self) -> None:
        """The persistent walk of a causal grid, for L2. With program 0 slowest (heavy first), the
        programs of one head (same program ids 1, 2) are a grid's worth apart, and at short sequences
        each re-reads its head's streamed tiles from memory (estimated ~1.8x the bytes of the
        non-causal walk at S = 512). Instead, the programs at the two ends of program 0 (levels a and
        grid0 - 1 - a) make a pair of about equal work; pairs are dealt round-robin (balanced as well
        as heavy-first, bench/hopper_notes.md), ordered in windows of whole heads whose streamed tiles
        fit in WINDOW_MB of L2 (a program streams a stage per trip of the pipelined loop and of the
        loops around it). Applies when the streamed tiles do not depend on program 0 and no trip count
        on programs 1, 2, an outer loop's index or a value read from a tensor (option window=False: the
        heavy-first walk)."""
        self.window_bytes, self.window_note = None, ""
        if not (self.persistent and self.order == "heavy_first" and self.options.get("window", True)):
            return
        nest = self._enclosing(self.k.body, self.loop)  # the loops around the pipelined one, outermost first
        if nest is None or any(not isinstance(x, ir.Loop) for x in nest):
            return
        loads = [x for x in self.loop.body if isinstance(x, ir.Op) and x.name == "load_async"]
        exprs = [ix for o in loads for ix in o.ins[0].index if ix is not None]
        exprs += [o.attrs[a] for o in loads for a in ("row", "col")]
        if any(x.kind == "pid" and x.name == "pid0" for e in exprs for x in ir.symbols(e)):
            return
        bounds = [e for x in nest + [self.loop] for e in (x.start, x.stop)]
        if any(x.kind == "pid" and x.name != "pid0" or x.kind == "loop" for e in bounds for x in ir.symbols(e)):
            return
        if any(ir.reads(e) for e in bounds):  # a count a program reads: unknown where the walk is planned
            return
        # the heaviest program's trips: pid0 at grid0 - 1 (a reversed walk) or at 0 (folded away)
        heavy = {"pid0": "(grid0 - 1)"} if self.reverse else None
        at = (lambda e: ir.as_expr(e)) if self.reverse else (lambda e: ir.fold(ir.as_expr(e), {"pid0": 0}))
        trips = []
        for x in nest + [self.loop]:
            t = self.expr(at(x.stop), heavy)
            if ir.symbols(x.start) or ir.evaluate(ir.as_expr(x.start), {}) != 0:
                t = f"{t} - ({self.expr(at(x.start), heavy)})"
            trips.append(f"({t})")
        stage = sum(t.numel * t.dtype.bytes for t in self.ring)
        self.window_bytes = f"{stage}LL * " + " * ".join(trips)
        self.window_note = " + ".join(t.name for t in self.ring) + f", {stage} bytes a stage"

    def _enclosing(self, nodes, target, outer=()) -> Optional[List[ir.Loop]]:
        """The loops around `target` in `nodes`, outermost first (None if it is not there)."""
        for n in nodes:
            if n is target:
                return list(outer)
            if isinstance(n, ir.Loop):
                found = self._enclosing(n.body, target, outer + (n,))
                if found is not None:
                    return found
        return None

    def plan_split(self) -> None:
        """Option split_tail: the persistent walk's last partial wave in parts of the pipelined loop
        (tiles/split.h). The loop must declare merge=k.lse_merge(out, lse); the stores of out and lse
        are the top-level register stores after it, and go to the workspace for a part."""
        self.split = None
        if not self.options.get("split_tail", False):
            return
        k, merge = self.k, self.loop.merge
        if merge is None:
            self._fail("option split_tail: the pipelined loop declares no merge= (k.lse_merge(out, lse)), so "
                       "its parts could not be combined")
        if not self.persistent or self.window_bytes is not None or self.reducer:
            self._fail("option split_tail cuts the plain persistent walk's units: not with persistent=False, "
                       "a reducer warp, or the causal pairs' window walk (take window=False with it)")
        if self.loop not in k.body:
            self._fail("option split_tail: the pipelined loop must be a top-level statement")
        after = k.body[k.body.index(self.loop) + 1:]
        stores = {}
        for P in (merge.out, merge.lse):
            every = [n for n in k.walk() if isinstance(n, ir.Op) and n.name in ("store", "store_add")
                     and n.ins[1].param is P]
            if len(every) != 1 or every[0] not in after or every[0].name != "store":
                self._fail(f"option split_tail: {P.name} must be stored once, after the pipelined loop, at top level")
            if any(v.stops for v in every[0].ins[1:]):
                self._fail(f"option split_tail: {P.name}'s window stops short ({every[0].ins[1].text()}), and the "
                           "parts' merge writes whole tiles")
            if id(every[0]) in self.tma_stores:
                self._fail(f"option split_tail: {P.name} is stored through TMA (option tma_store); a part's "
                           "store goes to the workspace from registers")
            stores[P.name] = every[0]
        o, l = stores[merge.out.name], stores[merge.lse.name]
        (ot, ov), (lt, lv) = o.ins, l.ins
        if ot.kind != "reg" or ov.rank != 2 or ot.dtype.name != "f32" or ot in self.flipped:
            self._fail(f"option split_tail: {merge.out.name} must be stored from an f32 register tile to a 2-D window")
        if lt.kind != "vec" or lv.rank != 1 or lt in self.flipped:
            self._fail(f"option split_tail: {merge.lse.name} must be stored from a row vector to a 1-D window")
        if ot.cols % 64 or ot.rows != self.BM:
            self._fail(f"option split_tail: the merge takes {self.BM}-row tiles of a multiple of 64 columns, "
                       f"{ot.name} is {ot.rows}x{ot.cols}")
        r, c = ov.kept
        Pl = lv.param
        self.split = dict(
            stores={id(o): "out", id(l): "lse"}, cols=ot.cols, out=merge.out.name, lse=Pl.name,
            row=self.expr(o.attrs["row"]), nrows=self.sym_name(merge.out.dims[r]),
            col="" if self.expr(o.attrs["col"]) == "0" else f" + ({self.expr(o.attrs['col'])})",
            ncols=self.sym_name(merge.out.dims[c]), out_ptr=self.view_ptr(ov), out_ld=self.sym_name(merge.out.strides[r]),
            lse_ptr=self.view_ptr(lv), lse_ld=self.sym_name(Pl.strides[lv.kept[0]]))
        if self.split["row"] != self.expr(l.attrs["row"]):
            self._fail(f"option split_tail: {merge.out.name} and {merge.lse.name} must be stored at the same row")

    def plan_ring_store(self) -> None:
        """Option ring_store: a 16-bit register tile stored once after the pipelined loop (the forward's
        O) goes to global memory by TMA from the last iteration's ring stage, carved out of a shared tile
        that only the loop's first mma reads (K): every warpgroup's last S has read it once the tile ends,
        so its bytes are free until the stage goes back to the producer. Option tma_store's staging tiles
        cost the D = 128 forward a ring stage; these cost nothing. Named barrier 8 + cw tells a warpgroup
        that the other one's last read of that tile has retired; the stage is handed back under the next
        program's first turn, once the store has read it (pingpong with the rotated loop peeled)."""
        self.ring_stores = {}  # id(store) -> (carved ring tile, staging type)
        if not self.options.get("ring_store", False):
            return
        if not (self.pingpong and self.deferred is not None and self.peel and self.continuous_turns()):
            self._fail("option ring_store hands the stage back under the next program's first turn: it takes "
                       "PingPong with the rotated loop peeled (option peel) and continuous turns")
        if not self.persistent or self.loop not in self.k.body:
            self._fail("option ring_store: a persistent walk whose pipelined loop is a top-level statement")
        if self.tma_stores or self.reduces or self.written:
            self._fail("option ring_store: not with tma_store, TMA reduces or written shared tiles (their named "
                       "barriers and stores are its own)")
        k = self.k
        readers = {}  # ring tile -> the loop mmas reading it
        for x in self.loop_body:
            if isinstance(x, ir.Op) and x.name == "mma":
                for t in x.ins:
                    if t in self.ring:
                        readers.setdefault(id(t), []).append(x)
        free = [t for t in self.ring if readers.get(id(t)) and self.deferred not in readers[id(t)]]
        after = k.body[k.body.index(self.loop) + 1:]
        for o in [n for n in after if isinstance(n, ir.Op) and n.name == "store"]:
            t, view = o.ins
            P = view.param
            if (t.kind != "reg" or t in self.flipped or t in self.split_k or view.rank != 2
                    or view.kept[1] != P.rank - 1 or P.rank > 4 or P.dtype.name not in ("bf16", "f16") or t.cols % 64):
                continue  # stored from registers, as without the option
            if view.stops:
                self._fail(f"option ring_store: {view.text()} stops short, and a TMA box writes whole rows", o)
            need = self.consumers * self.WG_ROWS * t.cols * 2
            fits = [r for r in free if math.prod(self.stored(r)) * r.dtype.bytes >= need]
            if not fits:
                self._fail(f"option ring_store: no ring tile read only by the loop's first mma holds {need} bytes "
                           f"for {t.name}", o)
            self._write_map(o, self.WG_ROWS, f"option ring_store: {P.name} is also loaded")
            self.ring_stores[id(o)] = (fits[0], f"st<{CTYPE[P.dtype.name]}, WG_ROWS, {t.cols}>")
            return  # one store a program: its stage is the last iteration's
        self._fail("option ring_store: no 16-bit register tile is stored after the pipelined loop")

    def continuous_turns(self) -> bool:
        return bool(self.pingpong and self.deferred is not None and self.options.get("continuous_turns", True))

    def plan_kv_rings(self) -> None:
        """Option kv_rings: the tile only the deferred mma reads (the forward's V) gets barriers of its
        own (`S.late`), so the stage of the tiles read in the same iteration (K) goes back to the
        producer as soon as their mmas retire, not after the next iteration's deferred mma. The producer
        waits for each release and expects each arrival on its own; a consumer waits for K before its
        first mma and for V only before the deferred mma that reads it. With shared memory for two
        stages only (wider key blocks), K then still lands an iteration ahead, as FlashAttention-3's
        separate K and V pipelines do. With ring_store the last iteration's K stage is kept for the O
        store as before, and its V stage goes back after the loop."""
        self.late_tile = None
        if not self.options.get("kv_rings", False):
            return
        if self.deferred is None:
            self._fail("option kv_rings gives the deferred mma's tile barriers of its own: it takes the rotated loop")
        loads = [x for x in self.loop.body if isinstance(x, ir.Op) and x.name == "load_async"]
        if len(loads) != 2 or any(id(x) in self.vec_tma for x in self.loop.body):
            self._fail("option kv_rings: the pipelined loop loads two tiles (K and V), and no vector by TMA")
        if any(x.ins[0].stops for x in loads):
            self._fail("option kv_rings: not with windows stopped short (the rows past a stop are zeroed "
                       "once a stage has landed, under one barrier)")
        readers = {id(x.outs[0]): [n for n in self.loop_body if isinstance(n, ir.Op) and n.name == "mma"
                                   and x.outs[0] in n.ins] for x in loads}
        late = [x.outs[0] for x in loads if readers[id(x.outs[0])] == [self.deferred]]
        if len(late) != 1 or any(self.deferred in readers[id(x.outs[0])] for x in loads if x.outs[0] is not late[0]):
            self._fail("option kv_rings: one loaded tile must be read by the deferred mma alone, and the other "
                       "one not by it")
        self.late_tile = late[0]
