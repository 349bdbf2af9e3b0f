"""IR → Hopper CUDA C++ for kernels that use no `mma`: op by op, onto include/tiles/simt.h.

Any kernel made of loads/stores through global windows, elementwise and broadcast arithmetic, row and
column reductions, masks, fills and casts on register tiles and vectors lowers here (the suite's
layernorm, rotary and attention_bwd_prep are three such kernels). Each IR op becomes one call into
simt.h, with the op's IR text as a comment on the same line; the IR's loops become C++ loops, its
scalar expressions C++ expressions over the block index, the tensors' run-time dims (int) and strides
(64-bit, so a tensor may pass 2^31 elements), and the float arguments.

Layout (simt.h explains it in full): the block is a TR x TC grid of threads; thread-column tc holds
chunks of V consecutive columns (16 bytes of a 16-bit tensor), thread-row tr holds rows tr, tr + TR, ...
The lowering picks one (TR, TC) for the whole kernel from its largest tile: lanes across the columns
first (up to a warp), rows next (up to 256 threads), then more warps per row until a thread holds at
most ELEMS_PER_THREAD values of a tile (a block has at most MAX_THREADS threads).

Not lowered here (LoweringError, with the reason): mma (the GEMM and attention lowerings own those),
shared tiles and load_async/wait (a register-only kernel needs neither).
"""
from __future__ import annotations

import re
import weakref
from typing import List, Optional

from tiles.core import ir
from tiles.core.ir import Expr, Loop, Op, Tile, View
from tiles.core.lowering import Lowered, Lowering, LoweringError, NamedViews, header_files

from . import runtime

ARCH = runtime.ARCH
TEMPLATES = str(runtime.INCLUDE_DIR.parent / "templates")
VMAX = 8  # columns per chunk at most: 16 bytes of bf16/f16 (two 16-byte accesses of f32)
ELEMS_PER_THREAD = 16  # values of the largest tile one thread holds, at most, where MAX_THREADS allows
MAX_THREADS = 512  # 128 registers a thread at most under __launch_bounds__
BASE_THREADS = 256  # rows are added up to this many threads before a row is split across warps
MAX_SCRATCH_BYTES = 48 * 1024

CTYPE = {"f32": "float", "bf16": "bf16", "f16": "f16", "i32": "int"}
UNARY = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "neg": "neg", "abs": "abs", "rsqrt": "rsqrt",
         "copy": "copy"}
BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "max": "max", "min": "min"}
BROADCAST = {"add": "add", "sub": "sub", "mul": "mul", "div": "safe_div"}
CMP = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
CXX_RESERVED = set("""alignas alignof and asm auto bool break case catch char class const constexpr continue
decltype default delete do double else enum explicit export extern false float for friend goto if inline int
long mutable namespace new noexcept not nullptr operator or private protected public register return short
signed sizeof static struct switch template this throw true try typedef typeid typename union unsigned using
virtual void volatile while L simt tiles scratch pid0 pid1 pid2 blockIdx threadIdx INFINITY""".split())


def _pow2_floor(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def _pow2_ceil(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def chunk_width(C: int, TC: int, vmax: int = VMAX) -> int:
    """simt.h's chunk_width: the largest power of two <= vmax dividing C with vmax * TC <= C (>= 1)."""
    v = vmax
    while v > 1 and (C % v or v * TC > C):
        v //= 2
    return max(v, 1)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def per_thread(rows: int, cols: int, TR: int, TC: int) -> int:
    """Values one thread holds of a (rows, cols) tile."""
    V = chunk_width(cols, TC)
    return _cdiv(rows, TR) * _cdiv(cols, TC * V) * V


def choose_layout(tiles: List[Tile], elems: int = ELEMS_PER_THREAD) -> tuple:
    """(TR, TC) for a kernel's tiles, at most `elems` values of a tile a thread; see the module doc."""
    regs = [t for t in tiles if t.kind == "reg"]
    rows = [t.rows for t in regs] + [t.shape[0] for t in tiles if t.kind == "vec" and t.axis == "row"]
    cols = [t.cols for t in regs] + [t.shape[0] for t in tiles if t.kind == "vec" and t.axis == "col"]
    R, C = max(rows, default=1), max(cols, default=1)
    chunks = _pow2_floor(max(1, C // VMAX))
    TC = min(32, chunks)
    TR = max(min(_pow2_ceil(R), max(1, BASE_THREADS // TC)), 32 // TC)

    def most():
        return max([per_thread(t.rows, t.cols, TR, TC) for t in regs], default=0)

    while most() > elems and TR * TC * 2 <= MAX_THREADS and TC * 2 <= chunks:
        TC *= 2
    return TR, TC


def _simple(text: str) -> bool:
    return re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*|\d+", text) is not None


class SimtLowering(Lowering):
    """The generic Hopper lowering for kernels without mma (see the module doc)."""

    backend = "hopper"
    template_dir = TEMPLATES
    int_call = {"min": "min({a}, {b})", "max": "max({a}, {b})", "cdiv": "simt::cdiv({a}, {b})"}
    stopped_windows = True  # a view's extent ends at a stop (view)
    ELEMS = ELEMS_PER_THREAD

    @classmethod
    def config(cls, kernel: Optional[str] = None, **_) -> dict:
        # attention_bwd_prep: 16 rows a block, not 64: more blocks in flight for a memory-bound
        # reduction, 1.05-1.14x on the H200 (bench/hopper_notes.md, tile sweep)
        return {"BM": 16} if kernel == "attention_bwd_prep" else {}

    def __init__(self, kernel: ir.Kernel, arch: Optional[str] = None, **options):
        super().__init__(kernel, arch or ARCH)
        if self.arch != ARCH:
            raise LoweringError(f"hopper: the generated kernels target {ARCH!r}, got {self.arch!r}")
        self.options = options
        for p in kernel.params:  # a kernel of the user's may hold any dtype: say which ones this lowering moves
            if p.dtype.name not in CTYPE:
                raise LoweringError(f"hopper: tensor {p.name} is {p.dtype}; the SIMT lowering (kernels without mma) "
                                    f"moves {', '.join(sorted(CTYPE))}")
        self.TR, self.TC = options.get("layout") or choose_layout(kernel.tiles, self.ELEMS)
        self.written = {op.ins[1].param.name for op in self._ops() if op.name == "store"}
        self.pnames = self._param_names()
        self.names = self._tile_names()
        self.scratch = 0  # floats of shared memory the reductions need (the largest one)
        self.views = NamedViews(self._taken_names())

    # ---------------------------------------------------------------- names and types
    def _ops(self):
        return [n for n in self.k.walk() if isinstance(n, Op)]

    def _param_names(self) -> dict:
        """C++ name of each tensor: its own, with '_' appended where it would hide a keyword or a name the
        template declares (a tensor `L` beside the layout typedef L)."""
        taken = set(CXX_RESERVED) | {s.name for s in self.k.scalars}
        out = {}
        for p in self.k.params:
            name = p.name
            while name in taken:
                name += "_"
            taken.add(name)
            out[p.name] = name
        return out

    def _taken_names(self) -> set:
        """The C++ names a new tile or window must not take: keywords, tensors, sizes, loop indices, and the
        tiles' own once they are named."""
        taken = set(CXX_RESERVED) | set(self.pnames.values()) | {s.name for s in self.k.scalars}
        for p in self.k.params:
            taken |= {self.sym_name(d) for d in p.dims} | {self.sym_name(s) for s in p.strides}
        taken |= {self.sym_name(n.index) for n in self.k.walk() if isinstance(n, Loop)}
        return taken | set(getattr(self, "names", {}).values())

    def _tile_names(self) -> dict:
        taken = self._taken_names()
        out = {}
        for t in self.k.tiles:
            name = t.name if re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", t.name) else "t_" + re.sub(r"\W", "_", t.name)
            while name in taken:
                name += "_"
            taken.add(name)
            out[t] = name
        return out

    def ctype(self, t: Tile) -> str:
        if t.kind == "reg":
            return f"simt::tile<{t.rows}, {t.cols}, L>"
        if t.kind == "vec":
            return f"simt::rvec<{t.shape[0]}, L>" if t.axis == "row" else f"simt::cvec<{t.shape[0]}, L>"
        raise LoweringError(f"hopper: shared tile {t.name} ({t.type_str()}): the no-mma lowering keeps every "
                            "tile in registers; load global windows straight into register tiles")

    def d(self, t: Tile) -> str:
        """The C++ element type results written to `t` are rounded to."""
        return CTYPE[t.dtype.name]

    def n(self, x) -> str:
        return self.names[x] if isinstance(x, Tile) else x

    def fexpr(self, x) -> str:
        if isinstance(x, bool):
            raise LoweringError(f"hopper: a boolean where a float value was expected: {x!r}")
        if isinstance(x, (int, float)):
            x = ir.Const(float(x))
        return self.float_expr(x)

    def iexpr(self, x) -> str:
        return self.expr(x if x is not None else 0)

    def view(self, v: View) -> str:
        """A simt::view1/view2 over window `v`: the fixed indices folded into the pointer (64-bit)."""
        p = v.param
        n = self.sym_name
        offs, ok = [], []
        for axis, x in enumerate(v.index):
            if x is None:
                continue
            e = self.expr(x)
            if e != "0":
                offs.append(f"{e if _simple(e) else f'({e})'} * {n(p.strides[axis])}")
            ok.append(f"simt::in_range({e}, {n(p.dims[axis])})")
        ptr = " + ".join([self.pnames[p.name]] + offs)
        ok_text = " && ".join(ok) or "true"
        T = ("" if p.name in self.written else "const ") + CTYPE[p.dtype.name]
        k = v.kept
        if len(k) == 2:
            text = (f"simt::view2<{T}>{{{ptr}, {ok_text}, {self.extent(v, k[0])}, {self.extent(v, k[1])}, "
                    f"{n(p.strides[k[0]])}, {n(p.strides[k[1]])}}}")
        else:
            text = f"simt::view1<{T}>{{{ptr}, {ok_text}, {self.extent(v, k[0])}, {n(p.strides[k[0]])}}}"
        return self.views.use(v, text)

    # ---------------------------------------------------------------- ops: one C++ statement each
    def emit(self, op: Op, code: str) -> List[str]:
        return [f"{code};  // {ir.format_op(op)}"]

    def op_load(self, op: Op):
        d, src = op.outs[0], op.ins[0]
        if isinstance(src, Tile):
            raise LoweringError(f"hopper: load from shared tile {src.name} at {op.loc}: the no-mma lowering has "
                                "no shared tiles")
        if d.kind == "reg":
            off = f"{self.iexpr(op.attrs.get('row'))}, {self.iexpr(op.attrs.get('col'))}"
        else:
            off = self.iexpr(op.attrs.get("row"))
        return self.emit(op, f"simt::load<{self.d(d)}>({self.n(d)}, {self.view(src)}, {off})")

    def op_store(self, op: Op):
        src, v = op.ins
        if src.kind == "reg":
            off = f"{self.iexpr(op.attrs.get('row'))}, {self.iexpr(op.attrs.get('col'))}"
        else:
            off = self.iexpr(op.attrs.get("row"))
        return self.emit(op, f"simt::store({self.view(v)}, {self.n(src)}, {off})")

    def op_fill(self, op: Op):
        d = op.outs[0]
        return self.emit(op, f"simt::fill<{self.d(d)}>({self.n(d)}, {self.fexpr(op.attrs.get('value', 0.0))})")

    def op_cast(self, op: Op):
        d, s = op.outs[0], op.ins[0]
        return self.emit(op, f"simt::unary<{self.d(d)}>({self.n(d)}, {self.n(s)}, simt::copy{{}})")

    def _unary(self, op: Op):
        d, s = op.outs[0], op.ins[0]
        return self.emit(op, f"simt::unary<{self.d(d)}>({self.n(d)}, {self.n(s)}, simt::{UNARY[op.name]}{{}})")

    def _binary(self, op: Op):
        d, a, b = op.outs[0], op.ins[0], op.ins[1]
        bt = self.n(b) if isinstance(b, Tile) else self.fexpr(b)
        return self.emit(op, f"simt::binary<{self.d(d)}>({self.n(d)}, {self.n(a)}, {bt}, simt::{BINARY[op.name]}{{}})")

    def _broadcast(self, op: Op):
        kind, axis = op.name.split("_")
        d, t, v = op.outs[0], op.ins[0], op.ins[1]
        return self.emit(op, f"simt::bcast_{axis}<{self.d(d)}>({self.n(d)}, {self.n(t)}, {self.n(v)}, "
                             f"simt::{BROADCAST[kind]}{{}})")

    def _reduce(self, op: Op):
        axis, kind = op.name.split("_")
        d, t = op.outs[0], op.ins[0]
        need = self._scratch_floats(axis, t)
        if need * 4 > MAX_SCRATCH_BYTES:
            raise LoweringError(f"hopper: {op.name} over {t.name} {t.type_str()} needs {need * 4} bytes of shared "
                                f"memory across warps (limit {MAX_SCRATCH_BYTES}) at {op.loc}")
        self.scratch = max(self.scratch, need)
        init = f", &{self.n(op.ins[1])}" if len(op.ins) > 1 else ""
        buf = "scratch" if need else "nullptr"
        return self.emit(op, f"simt::{axis}_reduce<{self.d(d)}>({self.n(d)}, {self.n(t)}, simt::{kind}_op{{}}, "
                             f"{buf}{init})")

    def _scratch_floats(self, axis: str, t: Tile) -> int:
        TR, TC = self.TR, self.TC
        if axis == "row":
            return _cdiv(t.rows, TR) * TR * (TC // 32) if TC > 32 else 0
        V = chunk_width(t.cols, TC)
        groups = TR if TC >= 32 else TR * TC // 32
        return groups * _cdiv(t.cols, TC * V) * TC * V if groups > 1 else 0

    def op_mask_causal(self, op: Op):
        t = op.outs[0]
        a = ", ".join(self.iexpr(op.attrs[k]) for k in ("row0", "col0", "offset"))
        return self.emit(op, f"simt::mask_causal<{self.d(t)}>({self.n(t)}, {a}, {self.fexpr(op.attrs['value'])})")

    def op_mask_window(self, op: Op):
        t = op.outs[0]
        a = ", ".join(self.iexpr(op.attrs[k]) for k in ("row0", "col0", "offset"))
        return self.emit(op, f"simt::mask_window<{self.d(t)}>({self.n(t)}, {a}, {self.fexpr(op.attrs['value'])})")

    def op_mask_cols(self, op: Op):
        t = op.outs[0]
        if t.kind != "reg":
            raise LoweringError(f"hopper: mask_cols on vector {t.name} at {op.loc} (the interpreter masks tiles only)")
        a = f"{self.iexpr(op.attrs['col0'])}, {self.iexpr(op.attrs['limit'])}"
        return self.emit(op, f"simt::mask_cols<{self.d(t)}>({self.n(t)}, {a}, {self.fexpr(op.attrs['value'])})")

    def op_mask_rows(self, op: Op):
        t = op.outs[0]
        a = f"{self.iexpr(op.attrs['row0'])}, {self.iexpr(op.attrs['limit'])}"
        return self.emit(op, f"simt::mask_rows<{self.d(t)}>({self.n(t)}, {a}, {self.fexpr(op.attrs['value'])})")

    def op_fill_where(self, op: Op):
        d, ref = op.outs[0], op.ins[0]
        return self.emit(op, f"simt::fill_where<{self.d(d)}>({self.n(d)}, {self.n(ref)}, simt::{CMP[op.attrs['cmp']]}{{}}, "
                             f"{self.fexpr(op.attrs['rhs'])}, {self.fexpr(op.attrs['value'])})")

    def op_mma(self, op: Op):
        raise LoweringError(f"hopper: kernel {self.k.name!r} uses mma (at {op.loc}); the no-mma lowering does not "
                            "lower it (the GEMM and attention lowerings do)")

    def op_load_async(self, op: Op):
        raise LoweringError(f"hopper: load_async at {op.loc}: the no-mma lowering keeps tiles in registers; use load")

    op_wait = op_load_async

    def __getattr__(self, name):
        if name.startswith("op_"):
            op = name[3:]
            if op in UNARY:
                return self._unary
            if op in BINARY:
                return self._binary
            if re.fullmatch(r"(add|sub|mul|div)_(row|col)", op):
                return self._broadcast
            if re.fullmatch(r"(row|col)_(sum|max)", op):
                return self._reduce
        raise AttributeError(name)

    # ---------------------------------------------------------------- the kernel
    def entry_name(self) -> str:
        sig = "_".join(p.dtype.name for p in self.k.params)
        return f"tiles_{self.k.name}_hopper_simt_{sig}"

    def params(self) -> List[str]:
        n = self.sym_name
        out = []
        for p in self.k.params:
            T = CTYPE[p.dtype.name]
            name = self.pnames[p.name]
            out.append(f"{T}* {name}" if p.name in self.written else f"const {T}* __restrict__ {name}")
        for p in self.k.params:
            out += [f"int {n(d)}" for d in p.dims] + [f"long long {n(s)}" for s in p.strides]
        out += [f"float {n(s)}" for s in self.k.scalars]
        return out

    def used_pids(self) -> List[str]:
        found = set()

        def scan(x):
            if isinstance(x, Expr):
                found.update(s.name for s in ir.symbols(x) if s.kind == "pid")
            elif isinstance(x, View):
                for e in x.index:
                    scan(e)

        for node in self.k.walk():
            if isinstance(node, Loop):
                scan(node.start)
                scan(node.stop)
            else:
                for x in list(node.ins) + list(node.attrs.values()):
                    scan(x)
        return sorted(found)

    def lower(self) -> Lowered:
        k = self.k
        decls = [f"{self.ctype(t)} {self.names[t]};  // {t.type_str()}" for t in k.tiles]
        body = self.body(k.body)
        threads = self.TR * self.TC
        regs = [t for t in k.tiles if t.kind == "reg"]
        src = self.env.get_template("simt.cu.j2").render(
            name=k.name, entry=self.entry_name(), ir_text=k.text(), TR=self.TR, TC=self.TC, VMAX=VMAX,
            threads=threads, params=self.params(), pids=self.used_pids(), scratch=self.scratch, decls=decls,
            views=self.views.lines, body=body, most=max([per_thread(t.rows, t.cols, self.TR, self.TC) for t in regs], default=0))
        args = [("ptr", p) for p in k.params]
        for p in k.params:
            args += [("dim", d) for d in p.dims] + [("stride64", s) for s in p.strides]
        args += [("f32", s) for s in k.scalars]
        return Lowered(kernel=k, backend="hopper", arch=self.arch, entry=self.entry_name(), source=src,
                       block=(threads, 1, 1), shared_bytes=0, args=args,
                       headers=header_files(str(runtime.INCLUDE_DIR)),
                       notes={"layout": (self.TR, self.TC), "static_smem": self.scratch * 4,
                              "grid": [ir.render(g) for g in k.grid],
                              "template_version": runtime.TEMPLATE_VERSION})

    # ---------------------------------------------------------------- launching
    _loaded: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

    @classmethod
    def kernel_for(cls, k: ir.Kernel, device_index: int):
        """(Lowered, runtime.Kernel) for IR `k` on a device: lowered, compiled (runtime cache) and loaded once."""
        per = cls._loaded.setdefault(k, {})
        hit = per.get(device_index)
        if hit is None:
            lowered = cls(k).lower()
            compiled = runtime.compile_cuda(lowered.source, name=lowered.entry + ".cu")
            hit = per[device_index] = (lowered, runtime.load(compiled.cubin, lowered.entry))
        return hit

    @classmethod
    def launch(cls, backend, kfn, *args, **kwargs) -> None:
        import torch

        bound = kfn.bind(*args, **kwargs)
        k = kfn.trace(*args, **kwargs)
        tensors = {p.name: bound.arguments[p.name] for p in k.params}
        devices = {t.device for t in tensors.values()}
        if len(devices) != 1 or next(iter(devices)).type != "cuda":
            raise ValueError(f"hopper: {k.name}'s tensors must all be on one CUDA device, got {sorted(map(str, devices))}")
        env = kfn.runtime_env(k, bound)
        grid = [int(ir.evaluate(g, env)) for g in k.grid]
        if any(g < 0 for g in grid):
            raise ValueError(f"{k.name}: negative grid {grid}")
        if 0 in grid:
            return
        if grid[0] >= 2**31 or grid[1] > 65535 or grid[2] > 65535:
            raise ValueError(f"hopper: {k.name}'s grid {grid} passes CUDA's limits (2^31-1, 65535, 65535)")
        device = next(iter(devices))
        with torch.cuda.device(device):
            lowered, kern = cls.kernel_for(k, device.index if device.index is not None else torch.cuda.current_device())
            kern.launch(grid, lowered.block, cls.argv(lowered, tensors, env))

    @staticmethod
    def argv(lowered: Lowered, tensors: dict, env: dict) -> list:
        """The kernel's arguments, in Lowered.args order, as ctypes values."""
        out = []
        for kind, x in lowered.args:
            if kind == "ptr":
                out.append(runtime.arg_ptr(tensors[x.name]))
            elif kind == "dim":
                out.append(runtime.arg_i32(env[x.name]))
            elif kind == "stride64":
                out.append(runtime.arg_i64(env[x.name]))
            else:
                out.append(runtime.arg_f32(env[x.name]))
        return out


class LayerNormLowering(SimtLowering):
    """layernorm: the generic lowering, one row a block from 1024 columns up, narrower rows packed
    until a block's tile holds 8192 values (16 rows at most); 8 values of a tile a thread, not 16:
    x, the centred copy, its square, weight and bias are all live across the two reductions, and at
    16 a thread ptxas aims at 64 registers and spills (NVRTC 13.0 on the H200, 4096 columns)."""

    ELEMS = 8

    @classmethod
    def config(cls, N: Optional[int] = None, NP: Optional[int] = None, **_) -> dict:
        width = NP or (_pow2_ceil(N) if N else None)
        if not width:
            return {}
        # one row a block from 1024 columns up, at 8 values a thread (ELEMS), against 8192 values a
        # block at 16 before: 1.28x at 1024 columns, 0.90-0.92x at 4096 (where 16 a thread spilled),
        # the same at 8192 (H200, bench/hopper_notes.md, session 12)
        return {"BM": 1 if width >= 1024 else min(16, 8192 // width)}
