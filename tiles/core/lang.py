"""The tile language: what a kernel body calls. Each call records one IR node and checks it.

Ops are destination-first (ThunderKittens style): `exp2(p, s)` writes p. Misuse raises TileError at
trace time with the op's name and the kernel line that called it.
"""
from __future__ import annotations

import keyword
import linecache
import math
import os
import re
import sys
import threading
from typing import Optional

from . import ir
from .dtypes import MMA_INPUTS, MMA_INPUTS_FP8, DType, as_dtype, f32
from .ir import Expr, Loc, Loop, Op, Param, Sym, Tile, View, as_expr

# Generic limits; each backend checks its own tighter budget when it lowers.
MAX_TILE_ELEMENTS = 256 * 256
MAX_SHARED_BYTES = 227 * 1024


class TileError(ValueError):
    """Misuse of the tile language, found at trace time."""


_state = threading.local()
_CORE_DIR = os.path.dirname(os.path.abspath(__file__))


def _caller_loc() -> Optional[Loc]:
    f = sys._getframe(1)
    while f is not None and os.path.dirname(os.path.abspath(f.f_code.co_filename)) == _CORE_DIR:
        f = f.f_back
    if f is None:
        return None
    fn, line = f.f_code.co_filename, f.f_lineno
    return Loc(os.path.basename(fn), line, linecache.getline(fn, line).strip())


def fail(op: str, msg: str):
    loc = _caller_loc()
    where = f" (at {loc}: `{loc.code}`)" if loc else ""
    raise TileError(f"{op}: {msg}{where}")


def current() -> "Builder":
    b = getattr(_state, "builder", None)
    if b is None:
        raise TileError("tile ops can only be called inside a @tiles.kernel function while it is traced")
    return b


_ASSIGN = re.compile(r"^\s*([A-Za-z_]\w*)\s*=")
_PAIR_ASSIGN = re.compile(r"^\s*([A-Za-z_]\w*)\s*,\s*([A-Za-z_]\w*)\s*=")
_IR_NAME = re.compile(r"pid[0-2]|t\d+")  # names the IR's text gives program ids and load tokens


class Builder:
    """The `k` handed to a kernel body: declares tiles, the grid, loops; collects the IR."""

    def __init__(self, name: str, pattern):
        self.name = name
        self.pattern = pattern
        self.tiles: list[Tile] = []
        self.blocks: list[list] = [[]]
        self._grid = None
        self._names: dict[str, int] = {}
        self._taken: set[str] = set()
        self._tokens = 0
        self._pending: dict[str, tuple] = {}  # token -> (its load_async, the block it was issued in), until waited on
        self._loops = 0
        self._has_pipeline = False
        self.lets: list = []  # the expressions k.let named, in order
        self.reads: list = []  # the tensor parameters k.read reads, in order

    # ---- naming: a tile takes the name of the variable it is assigned to, so the IR and the
    # generated code read like the kernel source.
    def _fresh(self, hint: str) -> str:
        n = self._names.get(hint, 0)
        name = hint if n == 0 else f"{hint}{n}"
        while name in self._taken:  # e.g. a second `t` became t1 before a variable named t1 was declared
            n += 1
            name = f"{hint}{n}"
        self._names[hint] = n + 1
        self._taken.add(name)
        return name

    def _name_from_source(self, default: str) -> str:
        loc = _caller_loc()
        m = _ASSIGN.match(loc.code) if loc else None
        return self._fresh(m.group(1) if m else default)

    def emit(self, node):
        self.blocks[-1].append(node)

    # ---- declarations
    def _tile(self, kind, shape, dtype, axis=None, what="tile"):
        dtype = as_dtype(dtype)
        for s in shape:
            if not isinstance(s, int) or s <= 0:
                fail(what, f"tile dimensions must be positive python ints (compile-time), got {shape}")
        numel = math.prod(shape)
        if numel > MAX_TILE_ELEMENTS:
            fail(what, f"tile {shape} has {numel} elements; the most one tile may hold is {MAX_TILE_ELEMENTS}")
        t = Tile(self._name_from_source(kind[0]), kind, tuple(shape), dtype, axis)
        self.tiles.append(t)
        if kind == "shared":
            used = sum(x.numel * x.dtype.bytes for x in self.tiles if x.kind == "shared")
            if used > MAX_SHARED_BYTES:
                fail(what, f"shared tiles need {used} bytes; at most {MAX_SHARED_BYTES} are available")
        return t

    def reg(self, rows: int, cols: int, dtype) -> Tile:
        """A register tile (rt)."""
        return self._tile("reg", (rows, cols), dtype, what="k.reg")

    def shared(self, rows: int, cols: int, dtype) -> Tile:
        """A shared-memory tile (st): smem on NVIDIA, LDS on AMD."""
        return self._tile("shared", (rows, cols), dtype, what="k.shared")

    def vec(self, n: int, dtype=f32, axis: str = "row") -> Tile:
        """A register vector: axis='row' holds one value per row of a tile, 'col' one per column."""
        if axis not in ("row", "col"):
            fail("k.vec", f"axis must be 'row' or 'col', got {axis!r}")
        return self._tile("vec", (n,), dtype, axis, what="k.vec")

    # ---- grid and scalars
    def grid(self, x, y=1, z=1):
        if self._grid is not None:
            fail("k.grid", "the grid is already set")
        self._grid = tuple(_int_expr("grid", v) for v in (x, y, z))
        if any(ir.reads(g) for g in self._grid):
            fail("k.grid", "the grid is sized on the host, which reads no tensor: size it by shapes (a k.read's "
                           "bound), and let each program's loops stop at what it reads")

    def program_id(self, axis: int) -> Sym:
        if axis not in (0, 1, 2):
            fail("k.program_id", f"axis must be 0, 1 or 2, got {axis!r}")
        return Sym(f"pid{axis}", "pid")

    cdiv = staticmethod(ir.cdiv)

    def let(self, value, name: Optional[str] = None):
        """`value`, a run-time integer of program ids and sizes, under a name: the IR's text form (the
        header of every generated source) declares `let name = ...` once and says the name wherever the
        value is used; the generated code is the same. The name defaults to the variable assigned
        (`row0 = k.let(qb * BM)`). A value of a loop's index is declared at the top of that loop's body
        (`let page = ...` of the key block a paged cache holds it in)."""
        e = _int_expr("k.let", value)
        if not isinstance(e, ir.Bin):
            return e  # a size, a program id or a number already reads as itself
        if name is None:
            loc = _caller_loc()
            m = _ASSIGN.match(loc.code) if loc else None
            if m is None:
                fail("k.let", "give the name (k.let(value, name)) where the value is not assigned to a variable")
            name = m.group(1)
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            fail("k.let", f"the name must be an identifier (not a keyword), got {name!r}")
        if name in self._taken or name in {x.label for x in self.lets} or _IR_NAME.fullmatch(name):
            fail("k.let", f"{name!r} already names a tile, an expression or a value of this kernel's IR "
                          f"(pid0..pid2, load tokens t0, t1, ...)")
        late = [x.name for x in ir.symbols(e) if x.kind not in ("pid", "dim", "stride", "loop")]
        if late:
            fail("k.let", f"names expressions of program ids, sizes and loop indices only; "
                          f"{name} reads {', '.join(sorted(set(late)))}")
        if e.label is not None:  # the same value under a second name: a copy carries it
            e = ir.Bin(e.op, e.a, e.b)
        e.label = name  # not reserved against later tiles: a clash is refused at the end of the trace,
        self.lets.append(e)  # never resolved by renaming a tile (whose name reaches the generated code)
        return e

    def grouped(self, pid, tiles_m, tiles_n, group: int, names=None):
        """(m, n) of tile `pid` in grouped order: `group` rows of tiles are swept column by column,
        so consecutive programs share A rows and B columns in L2. The two are named (k.let) after the
        variables assigned (`m, n = k.grouped(...)`), else `names`, else m and n."""
        width = group * tiles_n
        first_m = (pid // width) * group
        rows = ir.smin(tiles_m - first_m, group)
        m, n = first_m + (pid % width) % rows, (pid % width) // rows
        if names is None:
            loc = _caller_loc()
            pair = _PAIR_ASSIGN.match(loc.code) if loc else None
            names = pair.groups() if pair else ("m", "n")
        if not (isinstance(names, (tuple, list)) and len(names) == 2 and all(isinstance(x, str) for x in names)):
            fail("k.grouped", f"names must be two strings, got {names!r}")
        return self.let(m, names[0]), self.let(n, names[1])
    min = staticmethod(ir.smin)
    max = staticmethod(ir.smax)

    def read(self, tensor: "GlobalArg", *index, bound) -> ir.Read:
        """One int32 element of `tensor`, read by each program at run time: a sequence's own length in a
        batch of ragged ones (T[b]). Loop bounds, masks and offsets may use it; the grid may not. The host
        plans a launch (its grid, how it cuts the loops) without reading device memory, with `bound` in
        place of the value: a size no smaller than what the kernel uses, so clamp the read to it
        (k.min(k.read(T, b, bound=n), n)) where the tensor's values are the caller's."""
        if not isinstance(tensor, GlobalArg):
            fail("k.read", f"reads an element of a tensor parameter, got {type(tensor).__name__}")
        p = tensor.param
        if p.dtype.name != "i32":
            fail("k.read", f"{p.name} must be an int32 tensor, got {p.dtype.name}")
        if len(index) != p.rank:
            fail("k.read", f"{p.name} has {p.rank} axes; give one index for each, got {len(index)}")
        idx = tuple(_int_expr("k.read", x) for x in index)
        for x in idx:
            if isinstance(x, ir.Const) and x.value < 0:
                fail("k.read", f"negative index {x.value} into {p.name}")
        e = ir.Read(p, idx, _int_expr("k.read bound", bound))
        if ir.reads(e.bound) or any(s.kind not in ("dim", "stride") for s in ir.symbols(e.bound)):
            fail("k.read", f"bound= is a size the host knows (shapes, strides, numbers), got {ir.render(e.bound)}")
        if p not in self.reads:
            self.reads.append(p)
        return e

    # ---- loops
    def _loop(self, start, stop, pipelined, merge=None):
        if stop is None:
            start, stop = 0, start
        idx = Sym(self._fresh("i" if not pipelined else "kb"), "loop")
        loop = Loop(idx, _int_expr("range", start), _int_expr("range", stop), [], pipelined, _caller_loc(), merge)
        self.emit(loop)
        self.blocks.append(loop.body)
        try:
            yield idx
        finally:
            self.blocks.pop()

    def range(self, start, stop=None):
        """A sequential loop; the body is traced once."""
        return self._loop(start, stop, False)

    def pipeline(self, start, stop=None, *, merge: Optional[ir.LseMerge] = None):
        """The kernel's main loop: the overlap pattern pipelines the load_asyncs in its body.
        merge=k.lse_merge(O, L) lets a backend cut the loop's range into parts whose results merge
        by their log-sum-exp (see ir.LseMerge)."""
        if self._has_pipeline:
            fail("k.pipeline", "a kernel has at most one pipelined main loop")
        if merge is not None and not isinstance(merge, ir.LseMerge):
            fail("k.pipeline", f"merge= takes k.lse_merge(out, lse), got {type(merge).__name__}")
        self._has_pipeline = True
        return self._loop(start, stop, True, merge)

    def lse_merge(self, out: "GlobalArg", lse: "GlobalArg") -> ir.LseMerge:
        """The pipelined loop's parts merge by log-sum-exp: `out` holds each part's output normalized
        by its own sum, `lse` (f32, natural log) each part's log-sum-exp, one value per row of out."""
        for name, a in (("out", out), ("lse", lse)):
            if not isinstance(a, GlobalArg):
                fail("k.lse_merge", f"{name} must be a tensor parameter, got {type(a).__name__}")
        if out is lse:
            fail("k.lse_merge", "out and lse must be different tensors")
        if lse.dtype != f32:
            fail("k.lse_merge", f"lse ({lse.param.name}) must be float32, got {lse.dtype.name}")
        return ir.LseMerge(out.param, lse.param)

    @staticmethod
    def _walk(nodes):
        """The loops in `nodes`, nested ones too."""
        for n in nodes:
            if isinstance(n, Loop):
                yield n
                yield from Builder._walk(n.body)

    def finish(self, name, params, scalars, constexprs, doc) -> ir.Kernel:
        if self._grid is None:
            fail("kernel", f"{name} never called k.grid(...)")
        if self._pending:
            fail("kernel", f"load_async tokens {sorted(self._pending)} are never waited on")
        taken = {p.name for p in params} | {x.name for x in scalars} | set(constexprs)
        loops = {n.index.name for n in self._walk(self.blocks[0])}
        for e in self.lets:
            if e.label in taken:
                fail("k.let", f"{e.label!r} already names an argument of {name}")
            if e.label in self._taken or e.label in loops:
                fail("k.let", f"{e.label!r} also names a tile or a loop index of {name}: give one of them another name")
        return ir.Kernel(name, params, scalars, constexprs, self.tiles, self._grid, self.blocks[0], self.pattern, doc,
                         lets=list(self.lets), reads=list(self.reads))


class GlobalArg:
    """What a kernel body sees for a tensor parameter: dtype, shape, and G[b, :, h, :] windows."""

    def __init__(self, param: Param):
        self.param = param

    @property
    def dtype(self) -> DType:
        return self.param.dtype

    @property
    def shape(self) -> tuple:
        return self.param.dims

    @property
    def ndim(self):
        return self.param.rank

    def __getitem__(self, idx) -> View:
        if not isinstance(idx, tuple):
            idx = (idx,)
        if len(idx) != self.param.rank:
            fail("index", f"{self.param.name} has rank {self.param.rank}; got {len(idx)} indices")
        index, stops = [], []
        for x in idx:
            if isinstance(x, slice):
                if x.start is not None or x.step is not None:
                    fail("index", "only ':' and ':n' slices are supported; offsets go in row=/col= of load/store")
                index.append(None)
                stops.append(None if x.stop is None else _int_expr("index", x.stop))
            else:
                if isinstance(x, int) and not isinstance(x, bool) and x < 0:
                    fail("index", f"{self.param.name}[{x}]: a negative index is not counted from the end here; "
                                  "index with the size (e.g. X.shape[0] - 1)")
                index.append(_int_expr("index", x))
                stops.append(None)
        v = View(self.param, tuple(index), tuple(stops) if any(x is not None for x in stops) else ())
        if v.rank not in (1, 2):
            fail("index", f"a window keeps 1 or 2 axes, {self.param.name}{list(idx)} keeps {v.rank}")
        return v


# ----------------------------------------------------------------------------- op helpers


def _check_tile(op, x, kinds=("reg", "vec")):
    if not isinstance(x, Tile):
        fail(op, f"expected a tile, got {type(x).__name__}")
    if x.kind not in kinds:
        fail(op, f"{x.name} is a {x.kind} tile; this operand must be one of {kinds}")


def _same_shape(op, a: Tile, b: Tile):
    if a.shape != b.shape or (a.kind == "vec") != (b.kind == "vec") or a.axis != b.axis:
        fail(op, f"shape mismatch: {a.name} is {a.type_str()}, {b.name} is {b.type_str()}")


def _int_expr(what: str, x) -> Expr:
    """x as an integer run-time scalar: grid sizes, loop bounds, offsets and indices count elements."""
    e = as_expr(x)
    if e.is_float:
        fail(what, f"takes an integer, got a float scalar ({ir.render(e)}); divide sizes with // or k.cdiv")
    return e


def _record(name, outs, ins, **attrs):
    current().emit(Op(name, list(outs), list(ins), attrs, _caller_loc()))


def _scalar_or_tile(op, d: Tile, b):
    if isinstance(b, Tile):
        _check_tile(op, b)
        _same_shape(op, d, b)
        return b
    if isinstance(b, (int, float)) and not isinstance(b, bool):
        return ir.Const(float(b))
    if isinstance(b, Expr):
        return b
    fail(op, f"second operand must be a tile or a scalar, got {type(b).__name__}")


# ----------------------------------------------------------------------------- memory ops


def _window(op, v, dst: Tile, row, col):
    if not isinstance(v, View):
        fail(op, f"expected a global window like G[b, :, h, :], got {type(v).__name__}")
    if dst.kind == "vec":
        if v.rank != 1:
            fail(op, f"a vector moves through a 1-D window; {v.text()} keeps {v.rank} axes")
        if col is not None:
            fail(op, "a 1-D window takes row= only")
    elif v.rank != 2:
        fail(op, f"a tile moves through a 2-D window; {v.text()} keeps {v.rank} axes")
    if v.stops and op not in ("load", "load_async", "store"):
        # a load reads zeros past the stop and a store writes nothing there; an add has no such reading
        fail(op, f"{v.text()} stops an axis short (':n'): such a window is loaded or stored, not added to")
    return _int_expr(op, row if row is not None else 0), _int_expr(op, col if col is not None else 0)


def load(dst: Tile, src, row=None, col=None):
    """dst <- src. src is a global window (out-of-range elements read 0) or a shared tile."""
    _check_tile("load", dst)
    if isinstance(src, Tile):
        _check_tile("load", src, ("shared",))
        if dst.shape != src.shape:
            fail("load", f"shape mismatch: {dst.name} {dst.shape} vs {src.name} {src.shape}")
        if row is not None or col is not None:
            fail("load", f"a shared tile is read whole: row= / col= apply to global windows, not to {src.name}")
        _record("load", [dst], [src])
        return
    r, c = _window("load", src, dst, row, col)
    _record("load", [dst], [src], row=r, col=c if dst.kind != "vec" else None)


def load_async(dst: Tile, src: View, row=None, col=None) -> str:
    """Start dst(shared) <- src(global); returns a token for `wait`. Out-of-range reads 0."""
    _check_tile("load_async", dst, ("shared",))
    if isinstance(src, View) and src.param.dtype != dst.dtype:
        fail("load_async", f"an async copy moves bytes: {dst.name} is {dst.dtype}, {src.param.name} is "
                           f"{src.param.dtype}; load into a tile of the tensor's dtype, then cast")
    r, c = _window("load_async", src, dst, row, col)
    b = current()
    token = f"t{b._tokens}"
    b._tokens += 1
    op = Op("load_async", [dst], [src], {"row": r, "col": c, "token": token}, _caller_loc())
    b.emit(op)
    b._pending[token] = (op, b.blocks[-1])
    return token


def wait(*tokens):
    """Block until the load_asyncs behind these tokens have landed."""
    b = current()
    for t in tokens:
        if t not in b._pending:
            fail("wait", f"{t!r} is not an outstanding load_async token")
        if b._pending[t][1] is not b.blocks[-1]:
            fail("wait", f"{t!r} was issued in another loop body (or outside this one): a load_async is waited "
                         "for in the block that issued it")
        del b._pending[t]
    _record("wait", [], [], tokens=tuple(tokens))


def store(dst, src: Tile, row=None, col=None):
    """dst <- src, converted to dst's dtype. dst is a global window (out-of-range elements are
    dropped) or a shared tile of src's shape (the IR op `store_shared`: registers to shared memory,
    for an mma that reads the tile as an operand)."""
    _check_tile("store", src)
    if isinstance(dst, Tile):
        _check_tile("store", dst, ("shared",))
        _check_tile("store", src, ("reg",))
        if dst.shape != src.shape:
            fail("store", f"shape mismatch: {dst.name} {dst.shape} vs {src.name} {src.shape}")
        if row is not None or col is not None:
            fail("store", "a shared tile is written whole: no row= / col=")
        _record("store_shared", [dst], [src])
        return
    r, c = _window("store", dst, src, row, col)
    _record("store", [], [src, dst], row=r, col=c if src.kind != "vec" else None)


def store_add(dst: View, src: Tile, row=None, col=None):
    """dst(global) += src, atomically: programs that add into the same elements all count (in an
    order the hardware picks, so f32 sums may differ in the last bits from run to run). dst must be
    f32; out-of-range elements are dropped."""
    _check_tile("store_add", src, ("reg",))
    r, c = _window("store_add", dst, src, row, col)
    if dst.param.dtype.name != "f32":
        fail("store_add", f"{dst.text()} is {dst.param.dtype}; atomic accumulation is into f32 only")
    _record("store_add", [], [src, dst], row=r, col=c)


# ----------------------------------------------------------------------------- compute ops


def mma(acc: Tile, a: Tile, b: Tile, ta: bool = False, tb: bool = False, accumulate: bool = True):
    """acc += op(a) @ op(b) (acc = ... with accumulate=False). acc is f32; a, b both bf16, both f16, or
    both one 8-bit float format (f8e4m3 or f8e4m3fnuz)."""
    _check_tile("mma", acc, ("reg",))
    _check_tile("mma", a, ("reg", "shared"))
    _check_tile("mma", b, ("reg", "shared"))
    if acc.dtype != f32:
        fail("mma", f"the accumulator must be f32, {acc.name} is {acc.dtype}")
    if a.dtype not in MMA_INPUTS + MMA_INPUTS_FP8 or a.dtype != b.dtype:
        fail("mma", f"inputs must both be bf16 or both f16 (or both one 8-bit float format); got {a.name}: {a.dtype}, "
             f"{b.name}: {b.dtype}")
    m, ka = (a.cols, a.rows) if ta else (a.rows, a.cols)
    kb, n = (b.cols, b.rows) if tb else (b.rows, b.cols)
    if ka != kb or (m, n) != acc.shape:
        fail(
            "mma",
            f"shapes do not chain: op(a) is {m}x{ka}, op(b) is {kb}x{n}, acc {acc.name} is "
            f"{acc.rows}x{acc.cols}",
        )
    _record("mma", [acc], [a, b], ta=ta, tb=tb, accumulate=accumulate)


def zero(t: Tile):
    _check_tile("zero", t)
    _record("fill", [t], [], value=ir.Const(0.0))


def fill(t: Tile, value):
    _check_tile("fill", t)
    _record("fill", [t], [], value=as_expr(float(value) if isinstance(value, int) else value))


def cast(dst: Tile, src: Tile):
    _check_tile("cast", dst)
    _check_tile("cast", src)
    _same_shape("cast", dst, src)
    _record("cast", [dst], [src])


def _unary(name):
    def op(dst: Tile, src: Tile):
        _check_tile(name, dst)
        _check_tile(name, src)
        _same_shape(name, dst, src)
        _record(name, [dst], [src])

    op.__name__ = name
    op.__doc__ = f"dst = {name}(src), elementwise."
    return op


def _binary(name):
    def op(dst: Tile, a: Tile, b):
        _check_tile(name, dst)
        _check_tile(name, a)
        _same_shape(name, dst, a)
        _record(name, [dst], [a, _scalar_or_tile(name, dst, b)])

    op.__name__ = name
    op.__doc__ = f"dst = {name}(a, b), elementwise; b is a tile of the same shape or a scalar."
    return op


UNARY = ("exp", "exp2", "log", "log2", "neg", "abs", "rsqrt", "copy")
BINARY = ("add", "sub", "mul", "div", "max", "min")

exp, exp2, log, log2, neg, abs, rsqrt, copy = (_unary(n) for n in UNARY)
add, sub, mul, div, max, min = (_binary(n) for n in BINARY)


def _reduce(name, axis):
    def op(dst: Tile, src: Tile, init: Optional[Tile] = None):
        _check_tile(name, src, ("reg",))
        _check_tile(name, dst, ("vec",))
        n = src.rows if axis == "row" else src.cols
        if dst.axis != axis or dst.shape[0] != n:
            fail(name, f"{dst.name} must be vec<{n}, {axis}> for {src.name} {src.type_str()}, is {dst.type_str()}")
        if init is not None:
            _check_tile(name, init, ("vec",))
            _same_shape(name, dst, init)
        _record(name, [dst], [src] + ([init] if init is not None else []))

    op.__name__ = name
    op.__doc__ = f"dst[{'r' if axis == 'row' else 'c'}] = reduce over the other axis of src (combined with init)."
    return op


row_max, row_sum = _reduce("row_max", "row"), _reduce("row_sum", "row")
col_max, col_sum = _reduce("col_max", "col"), _reduce("col_sum", "col")


def _broadcast(name, axis):
    def op(dst: Tile, src: Tile, v: Tile):
        _check_tile(name, dst, ("reg",))
        _check_tile(name, src, ("reg",))
        _check_tile(name, v, ("vec",))
        _same_shape(name, dst, src)
        n = src.rows if axis == "row" else src.cols
        if v.axis != axis or v.shape[0] != n:
            fail(name, f"{v.name} must be vec<{n}, {axis}> for {src.name} {src.type_str()}, is {v.type_str()}")
        _record(name, [dst], [src, v])

    op.__name__ = name
    return op


add_row, sub_row, mul_row, div_row = (_broadcast(f"{o}_row", "row") for o in ("add", "sub", "mul", "div"))
add_col, sub_col, mul_col, div_col = (_broadcast(f"{o}_col", "col") for o in ("add", "sub", "mul", "div"))


def mask_causal(t: Tile, row0, col0, offset=0, value=-math.inf):
    """t[r, c] = value where col0 + c > row0 + r + offset (offset = Sk - Sq: bottom-right aligned)."""
    _check_tile("mask_causal", t, ("reg",))
    _record("mask_causal", [t], [], row0=as_expr(row0), col0=as_expr(col0), offset=as_expr(offset),
            value=as_expr(float(value)))


def mask_window(t: Tile, row0, col0, offset, value=-math.inf):
    """t[r, c] = value where col0 + c < row0 + r + offset: the keys before a sliding window's left edge
    (offset = Sk - Sq - left: row r sees left keys before its own bottom-right-aligned one)."""
    _check_tile("mask_window", t, ("reg",))
    _record("mask_window", [t], [], row0=as_expr(row0), col0=as_expr(col0), offset=as_expr(offset),
            value=as_expr(float(value)))


def mask_cols(t: Tile, col0, limit, value=-math.inf):
    """t[r, c] = value where col0 + c >= limit."""
    _check_tile("mask_cols", t, ("reg",))
    _record("mask_cols", [t], [], col0=as_expr(col0), limit=as_expr(limit), value=as_expr(float(value)))


def mask_rows(t: Tile, row0, limit, value=0.0):
    """t[r, c] = value where row0 + r >= limit (for vectors: t[r])."""
    _check_tile("mask_rows", t)
    _record("mask_rows", [t], [], row0=as_expr(row0), limit=as_expr(limit), value=as_expr(float(value)))


CMPS = ("==", "!=", "<", "<=", ">", ">=")


def fill_where(dst: Tile, ref: Tile, cmp: str, rhs, value):
    """dst[i] = value where ref[i] <cmp> rhs; elsewhere dst is unchanged."""
    _check_tile("fill_where", dst)
    _check_tile("fill_where", ref)
    _same_shape("fill_where", dst, ref)
    if cmp not in CMPS:
        fail("fill_where", f"cmp must be one of {CMPS}, got {cmp!r}")
    _record("fill_where", [dst], [ref], cmp=cmp, rhs=as_expr(float(rhs)), value=as_expr(float(value)))
