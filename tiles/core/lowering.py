"""What every vendor lowering shares: IR → C++ source through jinja2 templates.

A backend subclasses `Lowering` and supplies data (type names, the template folder, the arch) and one
`op_<name>` method per IR op (returning C++ statements that call its device headers). The pattern the
kernel declares picks the backend's template; the base class walks the IR, names run-time symbols and
assembles a `Lowered` (source + how to launch it). This is the tinygrad-style split: one C-like
renderer, vendor tables beside it.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Optional

import jinja2

from . import ir
from .cpp_text import drop_used_voids
from .ir import Const, Expr, Loop, Op, Sym

TEMPLATE_VERSION = "1"


@dataclass
class Lowered:
    """A kernel ready to compile: source text plus what the runtime needs to launch it."""

    kernel: ir.Kernel
    backend: str
    arch: str
    entry: str  # the __global__ function's name
    source: str
    block: tuple  # threads per block
    shared_bytes: int  # dynamic shared memory
    args: list  # ordered launch arguments: ("ptr", param) | ("dim", Sym) | ("stride", Sym) | ("f32", Sym) | ...
    headers: list = field(default_factory=list)  # device headers the source includes (for --emit)
    notes: dict = field(default_factory=dict)

    def __post_init__(self):
        # templates cast what a kernel may leave unused to void; the casts its body made moot go
        self.source = drop_used_voids(self.source)


def template_env(folder: str) -> jinja2.Environment:
    """One jinja2 environment per template folder, strict about undefined names."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


class NamedViews:
    """Global windows declared once, before a kernel's first statement, under their tensor's name (gX), with
    the window's IR text above: a load or store then reads `simt::load(x, gX, row, col)`. Only windows whose
    indices are fixed for the whole program (program ids and sizes) are declared; one that moves with a
    loop stays inline. `taken`: the C++ names the kernel already uses."""

    def __init__(self, taken):
        self.taken = set(taken)
        self.by_text: dict = {}
        self.lines: list = []

    def use(self, view: ir.View, text: str) -> str:
        """The name of the window `text` (its C++ construction) declares, or `text` where it must stay inline."""
        fixed = [x for x in view.index + view.stops if x is not None]  # (a stop is part of the window)
        if any(s.kind not in ("pid", "dim", "stride") for x in fixed for s in ir.symbols(x)):
            return text
        name = self.by_text.get(text)
        if name is None:
            base = "g" + "".join(c if c.isalnum() or c == "_" else "_" for c in view.param.name)
            name, i = base, 1
            while name in self.taken:
                name, i = f"{base}{i}", i + 1
            self.taken.add(name)
            self.by_text[text] = name
            self.lines += [f"// {view.text()}", f"const auto {name} = {text};"]
        return name


def check_reads(kernel: ir.Kernel, tensors: dict, env: dict, grid) -> None:
    """Before a launch: each tensor a program reads elements of (k.read) is int32, on the device of the
    kernel's other tensors, and holds every element the grid's programs read. An index of program ids
    and sizes takes its extremes at the grid's corners, where it is checked; one that moves with a
    loop is the kernel's to keep in range. Raises ValueError naming the tensor."""
    import itertools

    if not kernel.reads:
        return
    device = next(tensors[p.name].device for p in kernel.params if p not in kernel.reads)
    for p in kernel.reads:
        t = tensors[p.name]
        if t.dtype.is_floating_point or t.element_size() != 4 or t.device != device:
            raise ValueError(f"{kernel.name}: {p.name} is read by each program: an int32 tensor on {device}, got "
                             f"{t.dtype} on {t.device}")
    reads = [r for n in _exprs(kernel) for r in ir.reads(n)]
    for r in reads:
        t = tensors[r.param.name]
        # the axes indexed by program ids and sizes only (one that moves with a loop, a paged cache's
        # column of its table, is the kernel's to clamp)
        axes = [a for a, x in enumerate(r.index) if not ir.reads(x) and all(s.kind != "loop" for s in ir.symbols(x))]
        for corner in itertools.product(*[(0, max(int(g) - 1, 0)) for g in grid]):
            at = dict(env, pid0=corner[0], pid1=corner[1], pid2=corner[2])
            for a in axes:
                i = int(ir.evaluate(r.index[a], at))
                if not 0 <= i < t.shape[a]:
                    raise ValueError(f"{kernel.name}: program {corner} reads {r.text()}, index {i} on axis {a}, "
                                     f"outside {r.param.name} of shape {tuple(t.shape)}")


def _exprs(kernel: ir.Kernel):
    """Every scalar expression of the kernel's body: loop bounds, op attributes, view indices."""
    for n in kernel.walk():
        if isinstance(n, Loop):
            yield from (n.start, n.stop)
            continue
        for v in list(n.attrs.values()) + list(n.ins) + list(n.outs):
            if isinstance(v, Expr):
                yield v
            elif isinstance(v, ir.View):
                yield from (x for x in v.index if x is not None)


class LoweringError(ValueError):
    """The backend cannot lower this kernel (shape, dtype or op unsupported); says what would work."""


class Lowering:
    backend = "?"
    template_dir: str = ""
    # C++ spellings of the IR's scalar helpers.
    int_call = {"min": "min({a}, {b})", "max": "max({a}, {b})", "cdiv": "cdiv({a}, {b})"}
    # whether the lowering spells k.read (a program reading a tensor's element) and passes its tensor
    reads_tensors = False
    # whether it bounds a window stopped short (X[:n]: elements at or past n read as zeros)
    stopped_windows = False

    def __init__(self, kernel: ir.Kernel, arch: str):
        self.k = kernel
        self.arch = arch
        self.env = template_env(self.template_dir) if self.template_dir else None
        # k.let's values that read a tensor (a sequence's key count) and move with no loop: the source
        # declares each once a program, after its program ids (declarations()), and says its name
        # wherever it is used
        self.declared = frozenset(id(e) for e in kernel.lets
                                  if ir.reads(e) and not any(s.kind == "loop" for s in ir.symbols(e)))
        if kernel.reads and not self.reads_tensors:
            raise LoweringError(
                f"{self.backend}: kernel {kernel.name!r} reads elements of {', '.join(p.name for p in kernel.reads)} "
                f"(k.read), which this lowering ({type(self).__name__}) does not spell; the attention forward's "
                f"lowerings do, and backend='interp' runs any kernel")
        stopped = [v for n in kernel.walk() if isinstance(n, ir.Op) for v in n.ins if isinstance(v, ir.View) and v.stops]
        if stopped and not self.stopped_windows:
            raise LoweringError(
                f"{self.backend}: kernel {kernel.name!r} reads {stopped[0].text()}, a window stopped short (':n'), "
                f"which this lowering ({type(self).__name__}) does not bound; the attention and SIMT lowerings "
                f"do, and backend='interp' runs any kernel")

    def extent(self, view: ir.View, axis: int) -> str:
        """A window's extent along a kept axis: the tensor's size, or where the window stops short
        (X[:n]) the smaller of n and it, past which a load reads zeros."""
        dim = self.sym_name(view.param.dims[axis])
        stop = view.stop(axis)
        return dim if stop is None else self.int_call["min"].format(a=self.expr(stop), b=dim)

    # ---- names
    def sym_name(self, s: Sym) -> str:
        """C++ name of a run-time symbol: Q.shape1 -> Q_shape1, pid0 -> pid0, loop indices as is."""
        return s.name.replace(".", "_")

    def expr(self, e) -> str:
        if not isinstance(e, Expr):
            e = ir.as_expr(e)

        def call(op, a, b):
            if op == "//":
                return "/"
            return self.int_call[op].format(a=a, b=b)

        return ir.render(e, self.sym_name, call, read=self.read_text, declared=self.declared)

    def with_loop_lets(self, loop: Loop, pad: str, emit, reserved=()) -> list:
        """The lines `emit()` renders inside `loop`'s body, after declarations of the values k.let named
        in terms of its index (a paged cache's page of the key block) that those lines use, in the
        kernel's order: `const int page = ...;`, said by name below. A name the generated code uses
        itself (`reserved`) is refused."""
        import re

        lets = [e for e in self.k.lets if (lambda xs: xs and all(x == loop.index.name for x in xs))(
            [x.name for x in ir.symbols(e) if x.kind == "loop"])]
        saved = self.declared
        try:
            self.declared = saved | {id(e) for e in lets}
            body = emit()
            decls = []
            for i, e in enumerate(lets):  # each in terms of the ones before it
                self.declared = saved | {id(x) for x in lets[:i]}
                value = ir.Bin(e.op, e.a, e.b)
                decls.append((e.label, f"{pad}const int {e.label} = {self.expr(value)};  // let {e.label} = "
                                       f"{ir.render(value, labels=True)}"))
        finally:
            self.declared = saved
        code = lambda line: line.split("//", 1)[0]  # noqa: E731  (a name in a comment is not a use)
        kept, text = [], "\n".join(code(line) for line in body)
        for name, line in reversed(decls):  # the ones the body, or a kept declaration, reads
            if re.search(rf"\b{name}\b", text):
                if name in reserved:
                    raise LoweringError(f"{self.backend}: kernel {self.k.name!r}: k.let names a value {name!r}, a "
                                        f"name the generated code uses itself: choose another")
                kept.insert(0, line)
                text += "\n" + code(line).split("=", 1)[1]
        return kept + body

    def declarations(self, reserved=()) -> list:
        """`const int name = value;` for each value of self.declared, in the kernel's order; a name the
        generated code uses itself (`reserved`) is refused."""
        lines = []
        for e in self.k.lets:
            if id(e) in self.declared:
                if e.label in reserved:
                    raise LoweringError(f"{self.backend}: kernel {self.k.name!r}: k.let names a value {e.label!r}, a "
                                        f"name the generated code uses itself: choose another")
                value = ir.Bin(e.op, e.a, e.b)  # the same expression, unnamed: rendered in full
                lines.append(f"const int {e.label} = {self.expr(value)};  // let {e.label} = "
                             f"{ir.render(value, labels=True)}")
        return lines

    def read_text(self, r: ir.Read, expr=None) -> str:
        """C++ of a tensor element a program reads (k.read): the parameter's pointer at the index's offset."""
        expr = expr or self.expr

        def term(x) -> str:  # an index like b + 1 is multiplied whole by its stride
            s = expr(x)
            return s if re.fullmatch(r"\w+", s) else f"({s})"

        at = " + ".join(f"{term(x)} * {self.sym_name(r.param.strides[i])}" for i, x in enumerate(r.index))
        return f"{r.param.name}[{at}]"

    def float_expr(self, e) -> str:
        if isinstance(e, Const) and isinstance(e.value, float):
            return ir.render(e) + ("f" if "INFINITY" not in ir.render(e) else "")
        return f"(float)({self.expr(e)})"

    # ---- arguments: pointer per param, then each param's dims and strides, then float scalars
    def launch_args(self) -> list:
        args = []
        for p in self.k.params:
            args.append(("ptr", p))
        for p in self.k.params:
            args += [("dim", d) for d in p.dims] + [("stride", s) for s in p.strides]
        args += [("f32", s) for s in self.k.scalars]
        return args

    # ---- walking the body
    def body(self, nodes, depth: int = 0) -> list[str]:
        lines = []
        pad = "    " * depth
        for n in nodes:
            if isinstance(n, Loop):
                lines += self.loop(n, depth)
            else:
                fn = getattr(self, f"op_{n.name}", None)
                if fn is None:
                    raise LoweringError(f"{self.backend}: op {n.name!r} is not supported (at {n.loc})")
                lines += [pad + line for line in fn(n)]
        return lines

    def loop(self, n: Loop, depth: int) -> list[str]:
        pad = "    " * depth
        i = self.sym_name(n.index)
        head = f"for (int {i} = {self.expr(n.start)}; {i} < {self.expr(n.stop)}; ++{i}) {{"
        return [pad + head] + self.body(n.body, depth + 1) + [pad + "}"]

    def lower(self) -> Lowered:
        raise NotImplementedError


def match_tiled_gemm(k: ir.Kernel, fail) -> dict:
    """Recognise the suite's tiled GEMM shape in `k`, which both vendors' GEMM templates implement:
    zero(acc); one pipelined loop over cdiv(K, BK) of load_async(a), load_async(b), wait(both),
    mma(acc, a, b); store(C, acc) at the tile origin the loads use. `fail(why)` raises the backend's
    LoweringError. Returns the tensors, tiles, tile sizes, loop and the tile origin (row0, col0)."""
    text = lambda e: ir.render(ir.as_expr(e))  # noqa: E731
    if len(k.params) != 3 or any(p.rank != 2 for p in k.params) or k.scalars:
        fail("expected three 2-D tensors (A, B, C) and no float arguments")
    A, B, C = k.params
    loops = [n for n in k.body if isinstance(n, Loop)]
    ops = [n for n in k.body if isinstance(n, Op)]
    if len(loops) != 1 or not loops[0].pipelined:
        fail("expected exactly one k.pipeline loop")
    loop = loops[0]
    if [o.name for o in ops] != ["fill", "store"] or not (k.body.index(ops[0]) < k.body.index(loop) < k.body.index(ops[1])):
        fail("expected zero(acc) before the pipelined loop and store(C, acc) after it, nothing else")
    fill, store = ops
    acc = fill.outs[0]
    if text(fill.attrs.get("value", 1)) not in ("0", "0.0") or acc.kind != "reg" or acc.dtype.name != "f32":
        fail("the accumulator must be an f32 register tile zeroed before the loop")
    if [getattr(n, "name", "loop") for n in loop.body] != ["load_async", "load_async", "wait", "mma"]:
        fail("the loop body must be load_async(a), load_async(b), wait(both), mma(acc, a, b)")
    la, lb, wait, mma = loop.body
    a, b = la.outs[0], lb.outs[0]
    va, vb = la.ins[0], lb.ins[0]
    if va.param is not A or vb.param is not B or va.index != (None, None) or vb.index != (None, None):
        fail("the loads must read whole 2-D views A[:, :] and B[:, :]")
    if set(wait.attrs["tokens"]) != {la.attrs["token"], lb.attrs["token"]}:
        fail("the wait must cover both loads")
    if (mma.outs[0] is not acc or mma.ins != [a, b] or mma.attrs.get("ta") or mma.attrs.get("tb")
            or not mma.attrs.get("accumulate", True)):
        fail("expected mma(acc, a, b), accumulating, without transposes")
    if store.ins[0] is not acc or store.ins[1].param is not C or store.ins[1].index != (None, None):
        fail("expected store(C[:, :], acc, row=..., col=...)")
    (BM, BK), (BK2, BN) = a.shape, b.shape
    if BK2 != BK or tuple(acc.shape) != (BM, BN):
        fail(f"tile shapes disagree: a {a.shape}, b {b.shape}, acc {acc.shape}")
    want_k = f"{loop.index.name} * {BK}"
    if text(la.attrs["col"]) != want_k or text(lb.attrs["row"]) != want_k:
        fail(f"the loads must step K by kb*{BK}: A col {text(la.attrs['col'])}, B row {text(lb.attrs['row'])}")
    if text(loop.start) != "0" or text(loop.stop) != f"cdiv({A.name}.shape1, {BK})":
        fail(f"the pipelined loop must run over cdiv(K, {BK}) blocks from 0")
    if text(la.attrs["row"]) != text(store.attrs["row"]) or text(lb.attrs["col"]) != text(store.attrs["col"]):
        fail("A's rows and B's columns must come from the stored tile's origin")
    for e in (store.attrs["row"], store.attrs["col"]):
        bad = [s.name for s in ir.symbols(e) if s.kind not in ("pid", "dim")]
        if bad:
            fail(f"the tile origin may depend on program ids and sizes only, not {bad}")
    return dict(A=A, B=B, C=C, a=a, b=b, acc=acc, loop=loop, BM=BM, BN=BN, BK=BK,
                row0=store.attrs["row"], col0=store.attrs["col"])


def check_gemm_dtypes(backend: str, g: dict) -> None:
    A, B, C = g["A"], g["B"], g["C"]
    if A.dtype.name not in ("bf16", "f16") or B.dtype != A.dtype:
        raise LoweringError(f"{backend}: GEMM inputs must both be bf16 or both f16, got A {A.dtype}, B {B.dtype}")
    if C.dtype.name not in ("bf16", "f16", "f32"):
        raise LoweringError(f"{backend}: GEMM output must be bf16, f16 or f32, got {C.dtype}")


def header_files(include_dir: str) -> list:
    """Every header under `include_dir`, relative paths, for writing a standalone translation unit."""
    out = []
    for root, _, files in os.walk(include_dir):
        for f in sorted(files):
            if f.endswith((".h", ".hpp", ".cuh")):
                out.append(os.path.relpath(os.path.join(root, f), include_dir))
    return sorted(out)


def match_block_scaled_gemm(k: ir.Kernel, fail) -> dict:
    """Recognise one of the suite's scaled fp8 GEMMs (tiles/kernels/gemm_fp8.py), which both vendors'
    fp8 templates implement. Both are zero(acc); one pipelined loop over cdiv(K, BK) of load_async(a),
    load_async(b), wait, ..., mma(part, a, b, tb=True), ..., add(acc, part); store(C, acc):

    * block-scaled (gemm_fp8): load(sa), load(sb) before the mma and mul_row(part, sa), mul_col(part, sb)
      after it, in the loop (SB the 3-D per-column view);
    * row-wise (gemm_fp8_rowwise): nothing between the mma and the add; after the loop load(sa),
      load(sb), mul_row(acc, sa), mul_col(acc, sb) (SA (M, 1), SB (1, N)).

    The caller checks the input format its arch takes. `fail(why)` raises the backend's LoweringError.
    Returns the tensors, tile sizes, origin and `scaling` ("block" or "row")."""
    text = lambda e: ir.render(ir.as_expr(e))  # noqa: E731
    ranks = [p.rank for p in k.params]
    if ranks not in ([2, 2, 2, 3, 2], [2, 2, 2, 2, 2]) or k.scalars:
        fail("expected A, B (2-D), SA (2-D), SB (3-D per-column view, or 2-D (1, N) row-wise) and C (2-D), "
             "no float arguments")
    A, B, SA, SB, C = k.params
    if SA.dtype.name != "f32" or SB.dtype.name != "f32" or C.dtype.name not in ("bf16", "f32"):
        fail(f"scales must be f32 and C bf16 or f32; got SA {SA.dtype}, SB {SB.dtype}, C {C.dtype}")
    loops = [n for n in k.body if isinstance(n, ir.Loop)]
    ops = [n for n in k.body if isinstance(n, ir.Op)]
    row = SB.rank == 2
    after = ["fill", "load", "load", "mul_row", "mul_col", "store"] if row else ["fill", "store"]
    if len(loops) != 1 or not loops[0].pipelined or [o.name for o in ops] != after:
        fail(f"expected zero(acc), one k.pipeline loop, {'the scales applied to acc, ' if row else ''}store(C, acc)")
    loop = loops[0]
    names = [getattr(n, "name", "loop") for n in loop.body]
    want = ["load_async", "load_async", "wait"] + ([] if row else ["load", "load"]) + ["mma"] + \
        ([] if row else ["mul_row", "mul_col"]) + ["add"]
    if names != want:
        fail(f"the loop body must be {want}, got {names}")
    la, lb, mma, add = loop.body[0], loop.body[1], loop.body[names.index("mma")], loop.body[-1]
    acc, part = ops[0].outs[0], mma.outs[0]
    # the scales: read and applied to the finished acc (row-wise), or to each K block's part
    lsa, lsb, mr, mc = ops[1:5] if row else [loop.body[i] for i in (3, 4, 6, 7)]
    scaled = acc if row else part
    if text(ops[0].attrs.get("value", 0.0)) not in ("0.0", "0"):
        fail("the accumulator must start at zero")
    a, b, sa, sb = la.outs[0], lb.outs[0], lsa.outs[0], lsb.outs[0]
    if la.ins[0].param is not A or lb.ins[0].param is not B or lsa.ins[0].param is not SA or lsb.ins[0].param is not SB:
        fail("the loads must read A, B, SA, SB in that order")
    if mma.ins != [a, b] or not mma.attrs["tb"] or mma.attrs["ta"] or mma.attrs["accumulate"]:
        fail("expected mma(part, a, b, tb=True, accumulate=False)")
    if mr.outs[0] is not scaled or mr.ins != [scaled, sa] or mc.outs[0] is not scaled or mc.ins != [scaled, sb]:
        s = scaled.name
        fail(f"expected mul_row({s}, {s}, sa), mul_col({s}, {s}, sb)")
    if add.outs[0] is not acc or add.ins != [acc, part]:
        fail("expected add(acc, acc, part)")
    BM, BK = a.shape
    BN = b.shape[0]
    if b.shape[1] != BK or acc.shape != (BM, BN) or part.shape != (BM, BN):
        fail(f"tile shapes disagree: a {a.shape}, b {b.shape}, acc {acc.shape}")
    kb = loop.index.name
    if text(la.attrs["col"]) != f"{kb} * {BK}" or text(lb.attrs["col"]) != f"{kb} * {BK}":
        fail(f"the loads must step K by {kb}*{BK}")
    if row:
        if text(lsa.ins[0].index[1]) != "0" or text(lsb.ins[0].index[0]) != "0":
            fail("row-wise scales are read as SA[:, 0] and SB[0, :]")
    elif lsa.ins[0].index[1] is None or text(lsa.ins[0].index[1]) != kb or text(lsb.ins[0].index[2]) != kb:
        fail("the scales must be read at K block kb")
    if text(loop.stop) != f"cdiv({A.name}.shape1, {BK})" or text(loop.start) != "0":
        fail(f"the pipelined loop must run over cdiv(K, {BK}) blocks from 0")
    st = ops[-1]
    if (st.ins[0] is not acc or st.ins[1].param is not C or text(st.attrs["row"]) != text(la.attrs["row"])
            or text(st.attrs["row"]) != text(lsa.attrs["row"]) or text(st.attrs["col"]) != text(lb.attrs["row"])):
        fail("A's rows, SA's rows and B's rows must come from the stored tile's origin")
    if row and text(lsb.attrs["row"]) != text(st.attrs["col"]):
        fail("SB's columns must come from the stored tile's origin")
    return dict(A=A, B=B, SA=SA, SB=SB, C=C, BM=BM, BN=BN, BK=BK, row0=st.attrs["row"], col0=st.attrs["col"],
                scaling="row" if row else "block")


def find_ops(kernel: ir.Kernel, name: str) -> list[Op]:
    return [n for n in kernel.walk() if isinstance(n, Op) and n.name == name]


def first_loop(kernel: ir.Kernel) -> Optional[Loop]:
    return kernel.main_loop()
