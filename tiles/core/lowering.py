"""What every vendor lowering shares: IR → C++ source through jinja2 templates.

A backend subclasses `Lowering` and supplies data (type names, the template folder, the arch) and one
`op_<name>` method per IR op (returning C++ statements that call its device headers). The pattern the
kernel declares picks the backend's template; the base class walks the IR, names run-time symbols and
assembles a `Lowered` (source + how to launch it). This is the tinygrad-style split: one C-like
renderer, vendor tables beside it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

import jinja2

from . import ir
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


def template_env(folder: str) -> jinja2.Environment:
    """One jinja2 environment per template folder, strict about undefined names."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


class LoweringError(ValueError):
    """The backend cannot lower this kernel (shape, dtype or op unsupported); says what would work."""


class Lowering:
    backend = "?"
    template_dir: str = ""
    # C++ spellings of the IR's scalar helpers.
    int_call = {"min": "min({a}, {b})", "max": "max({a}, {b})", "cdiv": "cdiv({a}, {b})"}

    def __init__(self, kernel: ir.Kernel, arch: str):
        self.k = kernel
        self.arch = arch
        self.env = template_env(self.template_dir) if self.template_dir else None

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

        return ir.render(e, self.sym_name, call)

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


def header_files(include_dir: str) -> list:
    """Every header under `include_dir`, relative paths, for writing a standalone translation unit."""
    out = []
    for root, _, files in os.walk(include_dir):
        for f in sorted(files):
            if f.endswith((".h", ".hpp", ".cuh")):
                out.append(os.path.relpath(os.path.join(root, f), include_dir))
    return sorted(out)


def find_ops(kernel: ir.Kernel, name: str) -> list[Op]:
    return [n for n in kernel.walk() if isinstance(n, Op) and n.name == name]


def first_loop(kernel: ir.Kernel) -> Optional[Loop]:
    return kernel.main_loop()
