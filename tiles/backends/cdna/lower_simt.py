"""IR -> CDNA HIP for tile kernels without `mma` (layernorm, rotary, attention_bwd_prep, and any such
kernel a user writes): a generic lowering, op by op, onto include/tiles/simt.h.

Every register tile and vector of the kernel shares one block layout, `simt::layout<THREADS, TPR, VEC>`
(see simt.h): a row is spread over TPR consecutive threads in chunks of VEC columns (16-byte buffer
accesses for 16-bit data), TR = THREADS / TPR rows at a time. `choose_layout` picks it from the tile
shapes: VEC divides every column count, TPR covers the widest row with at most one chunk slot per thread
where the thread budget allows, and THREADS gives about 16 elements of the largest tile per thread
(no spills). Row reductions are lane butterflies (DPP / ds_swizzle / ds_bpermute through arch.h), plus
one LDS exchange when a row spans several waves; column reductions likewise across row groups.

Each IR op becomes one call, with the op's IR text as a comment above it; scalars come from
`Lowering.expr` (program ids, loop indices, dims, strides), so windows like `G[b, :, h, :]` with run-time
row=/col= offsets lower as they are. Ops the generic path cannot lower (mma, shared tiles, load_async)
raise LoweringError naming them.
"""
from __future__ import annotations

import math
from typing import Optional

from tiles.core import ir
from tiles.core.cpp_text import cast_i64
from tiles.core.lowering import Lowered, Lowering, LoweringError, NamedViews, header_files

from .gemm_probe import INCLUDE_DIR, TEMPLATE_DIR

TEMPLATE_VERSION = "cdna-simt-1"
DEFAULT_ARCH = "gfx942"
ARCHES = ("gfx942", "gfx950")
SIMT_KERNELS = ("layernorm", "rotary", "attention_bwd_prep")  # the suite kernels this lowering serves
ELEMS_PER_THREAD = 16  # of the largest tile: a few such tiles live at once stay far below 256 VGPRs
MAX_THREADS = 1024

_DT = {"bf16": "dt::bf16", "f16": "dt::f16", "f32": "dt::f32"}
_CMP = {"==": 0, "!=": 1, "<": 2, "<=": 3, ">": 4, ">=": 5}
UNARY = ("exp", "exp2", "log", "log2", "neg", "abs", "rsqrt", "copy")
BINARY = ("add", "sub", "mul", "div", "max", "min")
BROADCAST = tuple(f"{o}_{a}" for o in ("add", "sub", "mul", "div") for a in ("row", "col"))
REDUCE = ("row_max", "row_sum", "col_max", "col_sum")


# C++ keywords and the names the generated kernel itself declares: a tile or tensor named like one gets a '_'
RESERVED = set("""alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t
class compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype default
delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline int long mutable
namespace new noexcept not not_eq nullptr operator or or_eq private protected public register reinterpret_cast requires
return short signed sizeof static static_assert static_cast struct switch template this thread_local throw true try typedef
typeid typename union unsigned using virtual void volatile wchar_t while xor xor_eq
L red pid0 pid1 pid2 tiles simt arch dt INFINITY NAN u16 u32 imin imax cdiv""".split())


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def uses_mma(kernel: ir.Kernel) -> bool:
    return any(isinstance(n, ir.Op) and n.name == "mma" for n in kernel.walk())


def choose_layout(kernel: ir.Kernel, threads: Optional[int] = None, tpr: Optional[int] = None,
                  vec: Optional[int] = None) -> tuple:
    """(THREADS, TPR, VEC) for the kernel's register tiles and vectors (see the module doc)."""
    tiles_ = [t for t in kernel.tiles if t.kind in ("reg", "vec")]
    cols = [t.cols for t in tiles_ if t.kind == "reg"] + [t.shape[0] for t in tiles_ if t.kind == "vec" and t.axis == "col"]
    rows = [t.rows for t in tiles_ if t.kind == "reg"] + [t.shape[0] for t in tiles_ if t.kind == "vec" and t.axis == "row"]
    rows, cols = rows or [1], cols or [1]
    if vec is None:
        g = 0
        for c in cols:
            g = math.gcd(g, c)
        vec = 8
        while g % vec:
            vec //= 2
    rmax, cmax = max(rows), max(cols)
    elems = max([t.numel for t in tiles_] or [1])
    cc, rp = _pow2(-(-cmax // vec)), _pow2(rmax)
    if threads is None:
        threads = min(MAX_THREADS, max(64, _pow2(-(-elems // ELEMS_PER_THREAD))))
        threads = max(64, min(threads, _pow2(rp * cc)))  # no more threads than slots of the largest shape
    if tpr is None:
        tpr = min(cc, 64, threads)
        if threads // tpr > rp:  # too few rows for the row groups: spread a row over more threads
            tpr = min(cc, threads // rp) if cc > 64 else tpr
    if threads % 64 or threads > MAX_THREADS or threads % tpr or tpr & (tpr - 1) or vec not in (1, 2, 4, 8):
        raise LoweringError(f"cdna: bad SIMT layout threads={threads} tpr={tpr} vec={vec}")
    return threads, tpr, vec


class SimtLowering(Lowering):
    backend = "cdna"
    template_dir = TEMPLATE_DIR
    int_call = {"min": "imin({a}, {b})", "max": "imax({a}, {b})", "cdiv": "cdiv({a}, {b})"}
    stopped_windows = True  # a window's extent ends at a stop (window)

    def __init__(self, kernel: ir.Kernel, arch: Optional[str] = None, threads: Optional[int] = None,
                 tpr: Optional[int] = None, vec: Optional[int] = None):
        super().__init__(kernel, arch or DEFAULT_ARCH)
        if self.arch not in ARCHES:
            raise LoweringError(f"cdna: arch {self.arch!r} is not supported; choose one of {ARCHES}")
        self.check()
        self.threads, self.tpr, self.vec = choose_layout(kernel, threads, tpr, vec)
        self.red_floats = 0
        self.names = self.cxx_names()
        self.written = {op.ins[1].param.name for op in kernel.walk() if isinstance(op, ir.Op) and op.name == "store"}
        syms = {self.sym_name(d) for p in kernel.params for d in p.dims + p.strides}
        syms |= {self.sym_name(s) for s in kernel.scalars} | {self.sym_name(n.index) for n in kernel.walk() if isinstance(n, ir.Loop)}
        self.views = NamedViews(set(RESERVED) | syms | set(self.names.values()))

    # ---------------------------------------------------------------- what the generic path takes
    def check(self):
        k = self.k
        for n in k.walk():
            if isinstance(n, ir.Op) and n.name in ("mma", "load_async", "wait"):
                raise LoweringError(
                    f"cdna: the generic (SIMT) lowering takes kernels without mma, load_async or wait; {k.name!r} uses "
                    f"{n.name} (at {n.loc}) -- mma kernels lower through the GEMM/attention lowerings")
            if isinstance(n, ir.Op) and n.name == "load" and isinstance(n.ins[0], ir.Tile):
                raise LoweringError(f"cdna: the SIMT lowering has no shared tiles; {k.name!r} loads from {n.ins[0].name} (at {n.loc})")
        for t in k.tiles:
            if t.kind == "shared":
                raise LoweringError(f"cdna: the SIMT lowering has no shared tiles; {k.name!r} declares {t.name}")
            if t.dtype.name not in _DT:
                raise LoweringError(f"cdna: tile {t.name} is {t.dtype}; the SIMT lowering holds bf16, f16 and f32")
        for p in k.params:
            if p.dtype.name not in _DT:
                raise LoweringError(f"cdna: tensor {p.name} is {p.dtype}; the SIMT lowering moves bf16, f16 and f32")

    # ---------------------------------------------------------------- spelling
    def cxx_names(self) -> dict:
        """C++ name of every tile and tensor: the IR's own, with '_' appended on a clash with a keyword, the
        kernel's own names, or another IR name (a tile `x` beside a tensor `x`)."""
        taken, out = set(RESERVED), {}
        syms = {self.sym_name(d) for p in self.k.params for d in p.dims + p.strides}
        syms |= {self.sym_name(s) for s in self.k.scalars}
        syms |= {self.sym_name(n.index) for n in self.k.walk() if isinstance(n, ir.Loop)}
        taken |= syms
        for x in list(self.k.params) + list(self.k.tiles):
            name = x.name
            while name in taken:
                name += "_"
            taken.add(name)
            out[x] = name
        return out

    def n(self, x) -> str:
        return self.names[x]

    def sym_name(self, s: ir.Sym) -> str:
        name = super().sym_name(s)
        while s.kind in ("arg", "loop") and name in RESERVED:  # a float argument or loop index named like a keyword
            name += "_"
        return name

    def ctype(self, t: ir.Tile) -> str:
        d = _DT[t.dtype.name]
        if t.kind == "reg":
            return f"simt::tile<L, {t.rows}, {t.cols}, {d}>"
        return f"simt::{'rowvec' if t.axis == 'row' else 'colvec'}<L, {t.shape[0]}, {d}>"

    def fexpr(self, e) -> str:
        if isinstance(e, (int, float)):
            e = ir.Const(float(e))
        s = self.float_expr(e)
        return s

    def window(self, v: ir.View) -> str:
        """simt::window2/window1 of a view: base element of the fixed indices, kept dims and strides."""
        p = v.param
        n = self.sym_name
        fixed = [(i, x) for i, x in enumerate(v.index) if x is not None]
        base = " + ".join(f"{cast_i64(self.expr(x))} * {n(p.strides[i])}" for i, x in fixed) or "0"
        ok = " && ".join(f"simt::in({self.expr(x)}, {n(p.dims[i])})" for i, x in fixed)
        kept = v.kept
        dt = _DT[p.dtype.name]
        if len(kept) == 2:
            r, c = kept
            args = f"{self.n(p)}, {base}, {self.extent(v, r)}, {self.extent(v, c)}, {n(p.strides[r])}, {n(p.strides[c])}"
            return self.views.use(v, f"simt::window2<{dt}>({args}{', ' + ok if ok else ''})")
        (a,) = kept
        return self.views.use(v, f"simt::window1<{dt}>({self.n(p)}, {base}, {self.extent(v, a)}, {n(p.strides[a])}"
                                 f"{', ' + ok if ok else ''})")

    def note_reduction(self, op: ir.Op):
        src = op.ins[0]
        waves, tpr, vec = self.threads // 64, self.tpr, self.vec
        tr = self.threads // tpr
        if op.name.startswith("row"):
            ni = -(-src.rows // tr)
            need = waves * ni if tpr > 64 else 0
        else:
            kk = -(-src.cols // (tpr * vec)) * vec
            g, wpr = min(tpr, 64), (tpr // 64 if tpr > 64 else 1)
            need = waves * kk * g if waves // wpr > 1 else 0
        self.red_floats = max(self.red_floats, need)

    # ---------------------------------------------------------------- ops
    @staticmethod
    def comment(op: ir.Op) -> str:
        return f"// {ir.format_op(op)}"

    def op_load(self, op):
        d, v = op.outs[0], op.ins[0]
        return [self.comment(op), f"simt::load({self.n(d)}, {self.window(v)}, {self.origin(op, d)});"]

    def op_store(self, op):
        s, v = op.ins
        return [self.comment(op), f"simt::store({self.window(v)}, {self.n(s)}, {self.origin(op, s)});"]

    def origin(self, op, t) -> str:
        """(row0, col0) of the window origin: a vector's row= is the offset along its 1-D window (its columns)."""
        row = self.expr(op.attrs["row"])
        if t.kind == "vec":
            return f"0, {row}"
        col = self.expr(op.attrs["col"]) if op.attrs.get("col") is not None else "0"
        return f"{row}, {col}"

    def op_fill(self, op):
        return [self.comment(op), f"simt::fill({self.n(op.outs[0])}, {self.fexpr(op.attrs['value'])});"]

    def op_cast(self, op):
        return [self.comment(op), f"simt::cast({self.n(op.outs[0])}, {self.n(op.ins[0])});"]

    def _unary(self, op):
        return [self.comment(op), f"simt::{op.name}({self.n(op.outs[0])}, {self.n(op.ins[0])});"]

    def _binary(self, op):
        a, b = op.ins
        rhs = self.n(b) if isinstance(b, ir.Tile) else self.fexpr(b)
        return [self.comment(op), f"simt::{op.name}({self.n(op.outs[0])}, {self.n(a)}, {rhs});"]

    def _broadcast(self, op):
        t, v = op.ins
        return [self.comment(op), f"simt::{op.name}({self.n(op.outs[0])}, {self.n(t)}, {self.n(v)});"]

    def _reduce(self, op):
        self.note_reduction(op)
        init = f"{self.n(op.ins[1])}, " if len(op.ins) > 1 else ""
        return [self.comment(op), f"simt::{op.name}({self.n(op.outs[0])}, {self.n(op.ins[0])}, {init}red);"]

    def op_mask_causal(self, op):
        a = op.attrs
        return [self.comment(op), f"simt::mask_causal({self.n(op.outs[0])}, {self.expr(a['row0'])}, {self.expr(a['col0'])}, "
                                  f"{self.expr(a['offset'])}, {self.fexpr(a['value'])});"]

    def op_mask_window(self, op):
        a = op.attrs
        return [self.comment(op), f"simt::mask_window({self.n(op.outs[0])}, {self.expr(a['row0'])}, {self.expr(a['col0'])}, "
                                  f"{self.expr(a['offset'])}, {self.fexpr(a['value'])});"]

    def op_mask_cols(self, op):
        a = op.attrs
        return [self.comment(op), f"simt::mask_cols({self.n(op.outs[0])}, {self.expr(a['col0'])}, {self.expr(a['limit'])}, "
                                  f"{self.fexpr(a['value'])});"]

    def op_mask_rows(self, op):
        a = op.attrs
        return [self.comment(op), f"simt::mask_rows({self.n(op.outs[0])}, {self.expr(a['row0'])}, {self.expr(a['limit'])}, "
                                  f"{self.fexpr(a['value'])});"]

    def op_fill_where(self, op):
        a = op.attrs
        return [self.comment(op), f"simt::fill_where<{_CMP[a['cmp']]}>({self.n(op.outs[0])}, {self.n(op.ins[0])}, "
                                  f"{self.fexpr(a['rhs'])}, {self.fexpr(a['value'])});  // {a['cmp']}"]

    def __getattr__(self, name):
        if name.startswith("op_"):
            op = name[3:]
            if op in UNARY:
                return self._unary
            if op in BINARY:
                return self._binary
            if op in BROADCAST:
                return self._broadcast
            if op in REDUCE:
                return self._reduce
        raise AttributeError(name)

    def loop(self, n: ir.Loop, depth: int) -> list:
        pad = "    " * depth
        kind = "pipeline" if n.pipelined else "range"
        head = f"// for {n.index.name} in {kind}({ir.render(n.start)}, {ir.render(n.stop)})  (sequential here)"
        return [pad + head] + super().loop(n, depth)

    # ---------------------------------------------------------------- the kernel
    def arg_decl(self, kind, x) -> str:
        if kind == "ptr":
            return f"{'void' if x.name in self.written else 'const void'}* {self.n(x)}"
        if kind == "f32":
            return f"float {self.sym_name(x)}"
        return f"int {self.sym_name(x)}"

    def entry_name(self) -> str:
        dts = "_".join(p.dtype.name for p in self.k.params)
        return f"tiles_{self.k.name}_{self.arch}_{dts}_t{self.threads}_r{self.tpr}_v{self.vec}"

    def lower(self) -> Lowered:
        k = self.k
        body = self.body(k.body, 0)
        args = self.launch_args()
        name = self.entry_name()
        tr = self.threads // self.tpr
        decls = [(f"{self.ctype(t)} {self.n(t)};", t.type_str()) for t in k.tiles]
        source = self.env.get_template("simt.hip.j2").render(
            name=name, ir_name=k.name, ir_text=k.text(), arch=self.arch, template_version=TEMPLATE_VERSION,
            threads=self.threads, tpr=self.tpr, vec=self.vec, tr=tr, waves=self.threads // 64,
            arg_decls=[self.arg_decl(kd, x) for kd, x in args], decls=decls, views=self.views.lines, body=body,
            red_floats=self.red_floats,
            grid=[self.expr(g) for g in k.grid])
        return Lowered(kernel=k, backend="cdna", arch=self.arch, entry=name, source=source, block=(self.threads, 1, 1),
                       shared_bytes=0, args=args, headers=header_files(INCLUDE_DIR),
                       notes={"lowering": "simt", "layout": (self.threads, self.tpr, self.vec),
                              "lds_bytes": 4 * self.red_floats, "template_version": TEMPLATE_VERSION,
                              "requires": ["each window spans < 2 GiB from its origin (32-bit buffer offsets)",
                                           "dims and strides fit in int32"]})
