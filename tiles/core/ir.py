"""The tile IR: typed tiles, scalar expressions, bulk ops, loops and the overlap pattern.

The IR is imperative and destination-first, like the device code it becomes: a tile is a named
variable, and an op writes its first operand. Loops hold a body of nodes. Every node carries the
source location of the kernel line that made it, so errors and generated code can point back.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional, Union

from .dtypes import DType
from .patterns import Pattern

# ----------------------------------------------------------------------------- scalar expressions


class Expr:
    """An int (or float) scalar known at run time: program ids, loop indices, sizes, strides."""

    is_float = False

    def _bin(self, op, other, swap=False):
        other = as_expr(other)
        if op in ("//", "%") and (self.is_float or other.is_float):
            raise TypeError(f"'{op}' takes integer run-time scalars (a float one is divided with '/')")
        return Bin(op, other, self) if swap else Bin(op, self, other)

    __add__ = lambda s, o: s._bin("+", o)
    __radd__ = lambda s, o: s._bin("+", o, True)
    __sub__ = lambda s, o: s._bin("-", o)
    __rsub__ = lambda s, o: s._bin("-", o, True)
    __mul__ = lambda s, o: s._bin("*", o)
    __rmul__ = lambda s, o: s._bin("*", o, True)
    __floordiv__ = lambda s, o: s._bin("//", o)
    __rfloordiv__ = lambda s, o: s._bin("//", o, True)
    __truediv__ = lambda s, o: s._bin("/", o)
    __rtruediv__ = lambda s, o: s._bin("/", o, True)
    __mod__ = lambda s, o: s._bin("%", o)
    __rmod__ = lambda s, o: s._bin("%", o, True)

    def __neg__(self):
        return Bin("-", Const(0), self)

    def __bool__(self):
        raise TypeError(
            "a run-time scalar has no truth value at trace time: use masks, k.min/k.max or a constexpr argument"
        )

    def _no_compare(self, other):
        self.__bool__()

    __lt__ = __le__ = __gt__ = __ge__ = _no_compare

    def __eq__(self, other):
        # a run-time scalar against a number has no value at trace time (identity between expressions
        # stays what == means, as the IR's own lookups need)
        if isinstance(other, (int, float)) and not isinstance(other, bool):
            self.__bool__()
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return id(self)


@dataclass(eq=False)
class Const(Expr):
    value: Union[int, float]

    @property
    def is_float(self):
        return isinstance(self.value, float)


@dataclass(eq=False)
class Sym(Expr):
    """A named run-time value. kind: pid | loop | dim | stride | arg."""

    name: str
    kind: str
    float_: bool = False

    @property
    def is_float(self):
        return self.float_


@dataclass(eq=False)
class Bin(Expr):
    op: str  # + - * // / % min max cdiv
    a: Expr
    b: Expr
    # the name a kernel gave this expression (k.let): the IR's text form says the name where it is
    # used and declares it once; the backends render the expression itself
    label: Optional[str] = None

    @property
    def is_float(self):
        return self.op == "/" or self.a.is_float or self.b.is_float


@dataclass(eq=False)
class Read(Expr):
    """An integer element of a tensor parameter, read by the program at run time (k.read): a sequence's
    own length in a batch of ragged ones. The host never reads device memory to plan a launch, so it
    plans with `bound`, an expression of sizes no larger than any value the read may take in the kernel
    (where the kernel clamps the read, k.min(read, bound) says so)."""

    param: "Param"
    index: tuple  # one Expr per axis of param
    bound: Expr

    def text(self) -> str:
        return f"{self.param.name}[{', '.join(render(x, labels=True) for x in self.index)}]"


def read_key(param) -> str:
    """The key under which an evaluation's environment holds a read tensor's values (see evaluate)."""
    return f"{param.name}[]"


def as_expr(x) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, bool):
        raise TypeError("booleans are constexpr values, not run-time scalars")
    if isinstance(x, (int, float)):
        if x != x:
            raise ValueError("a NaN constant: kernels hold no NaN literal (a row or element that should be NaN "
                             "becomes one through its inputs)")
        return Const(x)
    raise TypeError(f"expected an int/float or a run-time scalar, got {type(x).__name__}")


def symbols(e) -> list:
    """Every Sym an expression reads, in order (with repeats)."""
    e = as_expr(e)
    if isinstance(e, Sym):
        return [e]
    if isinstance(e, Bin):
        return symbols(e.a) + symbols(e.b)
    if isinstance(e, Read):
        return [s for x in e.index for s in symbols(x)] + symbols(e.bound)
    return []


def reads(e) -> list:
    """Every Read an expression holds, in order."""
    e = as_expr(e)
    if isinstance(e, Read):
        return [e] + [r for x in e.index for r in reads(x)]
    if isinstance(e, Bin):
        return reads(e.a) + reads(e.b)
    return []


def smin(a, b):
    return Bin("min", as_expr(a), as_expr(b))


def smax(a, b):
    return Bin("max", as_expr(a), as_expr(b))


def cdiv(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return _EVAL["cdiv"](a, b)  # folded now by the rule the device's (a + b - 1) / b follows
    return Bin("cdiv", as_expr(a), as_expr(b))


def _cdiv_int(a, b):
    """C's integer division: the quotient truncated toward zero (Python's // floors). The generated
    code divides with C's /, so the reference does too; they differ only for negative operands."""
    if not b:
        return 0
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _cmod_int(a, b):
    """C's %: the remainder takes the dividend's sign (a == b * (a / b) + a % b)."""
    return a - b * _cdiv_int(a, b) if b else 0


_EVAL = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "//": _cdiv_int,
    "/": lambda a, b: a / b,
    "%": _cmod_int,
    "min": min,
    "max": max,
    "cdiv": lambda a, b: _cdiv_int(a + b - 1, b),  # (a + b - 1) / b, as the headers spell it
}


def evaluate(e: Expr, env: dict):
    """The value of `e` with the symbols' values in `env`. A Read takes its element of the tensor
    env[read_key(param)] where the environment has one (the interpreter's), else its bound (a host
    planning a launch)."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Sym):
        return env[e.name]
    if isinstance(e, Bin):
        return _EVAL[e.op](evaluate(e.a, env), evaluate(e.b, env))
    if isinstance(e, Read):
        values = env.get(read_key(e.param))
        if values is None:
            return evaluate(e.bound, env)
        at = tuple(int(evaluate(x, env)) for x in e.index)
        if any(not 0 <= i < n for i, n in zip(at, values.shape)):
            raise IndexError(f"k.read: {e.text()} at {at} is outside {e.param.name} of shape {tuple(values.shape)}")
        return int(values[at])
    raise TypeError(f"not an expression: {e!r}")


def fold(e: Expr, values: Optional[dict] = None, keep_labels: bool = False, keep=frozenset()) -> Expr:
    """`e` with the integer symbols named in `values` replaced by their values, integer constants
    folded by the C rules above (a division by a zero constant is left for the compiler to see) and,
    in integer expressions, x + 0, x - 0, x * 1 and x * 0 written as what they are. A lowering that renders a loop bound at a
    known program id gets `n` rather than `0 * 128 + n`. With `keep_labels` an expression k.let named
    stays as it is (the IR's text says its name), as do the expressions whose ids are in `keep`."""
    if isinstance(e, Sym):
        v = (values or {}).get(e.name)
        return Const(v) if isinstance(v, int) and not e.float_ else e
    if isinstance(e, Read):
        index = tuple(fold(x, values, keep_labels, keep) for x in e.index)
        return e if all(a is b for a, b in zip(index, e.index)) else Read(e.param, index, e.bound)
    if not isinstance(e, Bin) or keep_labels and e.label or id(e) in keep:
        return e
    a, b = fold(e.a, values, keep_labels, keep), fold(e.b, values, keep_labels, keep)
    ints = [isinstance(x, Const) and isinstance(x.value, int) and not isinstance(x.value, bool) for x in (a, b)]
    if all(ints) and e.op != "/" and not (e.op in ("//", "%", "cdiv") and b.value == 0):
        return Const(_EVAL[e.op](a.value, b.value))
    if e.is_float:  # float arithmetic keeps its own spelling (-0.0 + 0 is +0.0; x * 0 is NaN for inf)
        return e if (a is e.a and b is e.b) else Bin(e.op, a, b)
    if e.op == "+" and ints[0] and a.value == 0 or e.op == "*" and ints[0] and a.value == 1:
        return b
    if e.op in ("+", "-") and ints[1] and b.value == 0 or e.op == "*" and ints[1] and b.value == 1:
        return a
    if e.op == "*" and (ints[0] and a.value == 0 or ints[1] and b.value == 0):
        return Const(0)
    return e if (a is e.a and b is e.b) else Bin(e.op, a, b)


_PREC = {"+": 1, "-": 1, "*": 2, "//": 2, "/": 2, "%": 2}


def render(e: Expr, name: Callable[[Sym], str] = lambda s: s.name, call=None, parent=0, labels=False,
           read: Optional[Callable[["Read"], str]] = None, declared=frozenset()) -> str:
    """Text of an expression, folded first (fold). `call(op, a, b)` spells min/max/cdiv and the integer
    division for a target language, `read(r)` a tensor element a kernel reads (k.read); the default
    spelling is the IR's own, with `labels` the names k.let gave (the IR's text form). `declared`: ids
    of k.let's expressions that the target declares as variables, so their names stand for them."""
    if isinstance(e, Const):
        v = e.value
        if isinstance(v, float):
            return "INFINITY" if v == math.inf else "-INFINITY" if v == -math.inf else repr(v)
        return str(v)
    if isinstance(e, Sym):
        return name(e)
    if isinstance(e, Read):
        if read is None and call is not None:  # a target language without a spelling for it
            raise TypeError(f"this renderer has no spelling for a tensor read ({e.text()})")
        return read(fold(e)) if read is not None else e.text()
    if isinstance(e, Bin) and e.label and (labels or id(e) in declared):
        return e.label
    if not parent:
        e = fold(e, keep_labels=labels, keep=declared)
        if not isinstance(e, Bin) or e.label and (labels or id(e) in declared):
            return render(e, name, call, parent, labels, read, declared)
    a = render(e.a, name, call, _PREC.get(e.op, 0), labels, read, declared)
    b = render(e.b, name, call, _PREC.get(e.op, 0) + 1, labels, read, declared)
    if e.op in ("min", "max", "cdiv"):
        return call(e.op, a, b) if call else f"{e.op}({a}, {b})"
    op = e.op
    if call and op == "//":
        op = call("//", None, None) or "/"
    s = f"{a} {op} {b}"
    return f"({s})" if _PREC[e.op] < parent else s


# ----------------------------------------------------------------------------- values


@dataclass(eq=False)
class Tile:
    """A register tile (kind='reg'), shared tile (kind='shared') or register vector (kind='vec').

    Vectors have shape (n,) and an axis: 'row' holds one value per row of an (n, x) tile,
    'col' one value per column of an (x, n) tile."""

    name: str
    kind: str
    shape: tuple
    dtype: DType
    axis: Optional[str] = None  # vectors only

    @property
    def rows(self):
        return self.shape[0]

    @property
    def cols(self):
        return self.shape[1] if len(self.shape) > 1 else 1

    @property
    def numel(self):
        return math.prod(self.shape)

    def type_str(self) -> str:
        if self.kind == "vec":
            return f"vec<{self.dtype}, {self.shape[0]}, {self.axis}>"
        prefix = "rt" if self.kind == "reg" else "st"
        return f"{prefix}<{self.dtype}, {self.shape[0]}x{self.shape[1]}>"

    def __repr__(self):
        return self.name

    def __hash__(self):
        return id(self)


@dataclass(eq=False)
class Param:
    """A global tensor parameter: rank, dtype, run-time dims and strides."""

    name: str
    rank: int
    dtype: DType
    dims: tuple = ()
    strides: tuple = ()

    def __post_init__(self):
        self.dims = tuple(Sym(f"{self.name}.shape{i}", "dim") for i in range(self.rank))
        self.strides = tuple(Sym(f"{self.name}.stride{i}", "stride") for i in range(self.rank))

    def __hash__(self):
        return id(self)


@dataclass(eq=False)
class View:
    """A 1-D or 2-D window of a Param: fixed indices on some axes, the rest kept (rows, cols)."""

    param: Param
    index: tuple  # one entry per param axis: an Expr, or None for a kept axis
    # per param axis, None or an Expr n (the window X[:n]): a kept axis's elements at or past n read as
    # zeros, as past the tensor's end (a sequence's own keys in a cache allocated for the longest)
    stops: tuple = ()

    def stop(self, axis: int):
        return self.stops[axis] if self.stops else None

    @property
    def kept(self) -> tuple:
        return tuple(i for i, x in enumerate(self.index) if x is None)

    @property
    def rank(self):
        return len(self.kept)

    @property
    def dims(self):
        return tuple(self.param.dims[i] for i in self.kept)

    @property
    def dtype(self):
        return self.param.dtype

    def text(self) -> str:
        parts = [(f":{render(self.stop(i), labels=True)}" if self.stop(i) is not None else ":") if x is None
                 else render(x, labels=True) for i, x in enumerate(self.index)]
        return f"{self.param.name}[{', '.join(parts)}]"


# ----------------------------------------------------------------------------- nodes


@dataclass(eq=False)
class Loc:
    file: str
    line: int
    code: str = ""

    def __str__(self):
        return f"{self.file}:{self.line}"


@dataclass(eq=False)
class Op:
    """A bulk op. outs are written, ins are read; attrs hold static values and scalar Exprs."""

    name: str
    outs: list
    ins: list
    attrs: dict = field(default_factory=dict)
    loc: Optional[Loc] = None


@dataclass(eq=False)
class LseMerge:
    """A pipelined loop's permission to be cut into parts of its range (flash-decoding's split-KV):
    run over a part, the stores after the loop write `out` normalized by that part's own softmax sum
    and `lse` (f32) as its natural-log sum of exponentials, so the parts merge exactly as
    out = sum_i exp(lse_i - lse) out_i with lse = log sum_i exp(lse_i). A part that sees no key
    stores lse = +inf (no mass) and is left out of the merge. A backend may split or not."""

    out: "Param"
    lse: "Param"

    def text(self) -> str:
        return f"lse_merge({self.out.name}, {self.lse.name})"


@dataclass(eq=False)
class Loop:
    index: Sym
    start: Expr
    stop: Expr
    body: list
    pipelined: bool = False
    loc: Optional[Loc] = None
    merge: Optional[LseMerge] = None  # pipelined loops only


@dataclass(eq=False)
class Kernel:
    """One specialization of a traced kernel."""

    name: str
    params: list  # Param
    scalars: list  # Sym(kind='arg') for float run-time arguments
    constexprs: dict
    tiles: list  # every Tile declared, in order
    grid: tuple  # three Exprs
    body: list
    pattern: Pattern
    doc: str = ""
    lets: list = field(default_factory=list)  # the Bins k.let named, in order (the text form declares them)
    reads: list = field(default_factory=list)  # the Params k.read reads, in order (each once)

    # --- queries the lowerings use
    def walk(self, nodes=None):
        """Every node, depth first, loops before their bodies."""
        for n in self.body if nodes is None else nodes:
            yield n
            if isinstance(n, Loop):
                yield from self.walk(n.body)

    def main_loop(self) -> Optional[Loop]:
        for n in self.walk():
            if isinstance(n, Loop) and n.pipelined:
                return n
        return None

    def shared_bytes(self) -> int:
        return sum(t.numel * t.dtype.bytes for t in self.tiles if t.kind == "shared")

    def text(self) -> str:
        return format_kernel(self)


# ----------------------------------------------------------------------------- text form


def _arg_text(x) -> str:
    if isinstance(x, Tile):
        return x.name
    if isinstance(x, View):
        return x.text()
    if isinstance(x, Expr):
        return render(x, labels=True)
    if isinstance(x, float):
        return render(Const(x))
    return repr(x)


def format_op(op: Op) -> str:
    if op.name == "wait":
        return f"wait({', '.join(op.attrs['tokens'])})"
    operands = op.outs + op.ins
    if op.name in ("store", "store_add"):  # destination first, as written in the kernel
        operands = [op.ins[1], op.ins[0]]
    args = [_arg_text(x) for x in operands]
    hidden = {"token"}
    args += [f"{k}={_arg_text(v)}" for k, v in op.attrs.items() if v is not None and k not in hidden
             and not (isinstance(v, bool) and not v and k in ("ta", "tb"))]
    lhs = f"{op.attrs['token']} = " if op.name == "load_async" else ""
    return f"{lhs}{op.name}({', '.join(args)})"


def format_kernel(k: Kernel) -> str:
    lines = []
    sig = ", ".join(f"{p.name}: {p.dtype}[{p.rank}d]" for p in k.params)
    sig += "".join(f", {s.name}: f32" for s in k.scalars)
    lines.append(f"kernel {k.name}({sig})")
    if k.constexprs:
        lines.append("  constexpr " + ", ".join(f"{a}={v!r}" for a, v in k.constexprs.items()))
    lines.append(f"  overlap {k.pattern.describe()}")
    nesting = {}  # loop index -> its depth: a let of loop indices is declared in its innermost loop

    def nest(nodes, d):
        for n in nodes:
            if isinstance(n, Loop):
                nesting[n.index.name] = d
                nest(n.body, d + 1)

    nest(k.body, 0)

    def home(e):
        loops = [s.name for s in symbols(e) if s.kind == "loop"]
        return max(loops, key=lambda x: nesting.get(x, -1)) if loops else None

    def let_line(e, pad):
        return f"{pad}let {e.label} = {render(Bin(e.op, e.a, e.b), labels=True)}"

    for e in k.lets:
        if home(e) is None:
            lines.append(let_line(e, "  "))
    lines.append("  grid (" + ", ".join(render(g, labels=True) for g in k.grid) + ")")
    for t in k.tiles:
        lines.append(f"  {t.kind:6} {t.name}: {t.type_str()}")

    def body(nodes, depth):
        pad = "  " * depth
        for n in nodes:
            if isinstance(n, Loop):
                kw = "pipeline" if n.pipelined else "range"
                merge = f", merge={n.merge.text()}" if n.merge is not None else ""
                lines.append(f"{pad}for {n.index.name} in {kw}({render(n.start, labels=True)}, "
                             f"{render(n.stop, labels=True)}{merge}):")
                lines.extend(let_line(e, pad + "  ") for e in k.lets if home(e) == n.index.name)
                body(n.body, depth + 1)
            else:
                lines.append(f"{pad}{format_op(n)}")

    body(k.body, 1)
    return "\n".join(lines)
