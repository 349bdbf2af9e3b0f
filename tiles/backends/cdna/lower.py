"""IR -> CDNA HIP: the GEMM kernel (tiles/kernels/gemm.py) lowered onto the GEMM template.

The lowering recognises the IR of a tiled GEMM main loop and checks every assumption the template makes:
one f32 register accumulator zeroed before a pipelined loop over K tiles; in the loop, `load_async` of an
A tile (rows = the tile row, cols = kb*BK) and of a B tile (rows = kb*BK, cols = the tile column), a
`wait` on both, and `mma(acc, a, b)`; after it, `store` of the accumulator at the same tile origin.
Then the template's memory / compute clusters (the 8-wave ping-pong of schedule.py) implement that loop,
and only the kernel signature and the tile origin come from the IR (templates/gemm_ir.hip.j2).

Overlap patterns: ProducerConsumer, PingPong and Pipelined map to the 8-wave ping-pong (ARCHITECTURE.md:
wave specialisation loses on CDNA without register reallocation). Interleave (4-wave) exists as schedule
data (schedule.interleave_gemm) but has no GEMM template yet, so it is refused with that reason.
Anything else raises LoweringError naming what would work.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from tiles.core import ir
from tiles.core.lowering import Lowered, Lowering, LoweringError, header_files
from tiles.core.patterns import Interleave

from . import gemm_probe
from .gemm_probe import INCLUDE_DIR, TEMPLATE_DIR, TEMPLATE_VERSION

THREADS = gemm_probe.THREADS
DEFAULT_ARCH = "gfx942"


def _text(e) -> str:
    return ir.render(ir.as_expr(e))


class CDNALowering(Lowering):
    backend = "cdna"
    template_dir = TEMPLATE_DIR
    int_call = {"min": "imin({a}, {b})", "max": "imax({a}, {b})", "cdiv": "cdiv({a}, {b})"}

    def __init__(self, kernel: ir.Kernel, arch: Optional[str] = None, **options):
        super().__init__(kernel, arch or DEFAULT_ARCH)
        self.options = options  # extra GEMM template options (mf, chunk, direct_a, ...)

    # ---------------------------------------------------------------- recognising the GEMM
    def _fail(self, why: str):
        raise LoweringError(f"cdna: kernel {self.k.name!r} does not have the GEMM shape the CDNA template implements: {why}")

    def match_gemm(self) -> Dict:
        k = self.k
        if isinstance(k.pattern, Interleave):
            raise LoweringError("cdna: the 4-wave Interleave pattern has schedule data (schedule.interleave_gemm) but no "
                                "GEMM template yet; declare ProducerConsumer, PingPong or Pipelined (8-wave ping-pong)")
        if len(k.params) != 3 or any(p.rank != 2 for p in k.params) or k.scalars:
            self._fail("expected three 2-D tensors (A, B, C) and no float arguments")
        top = [n for n in k.body]
        loops = [n for n in top if isinstance(n, ir.Loop)]
        ops = [n for n in top if isinstance(n, ir.Op)]
        if len(loops) != 1 or not loops[0].pipelined:
            self._fail("expected exactly one k.pipeline loop")
        loop = loops[0]
        if [o.name for o in ops] != ["fill", "store"] or top.index(ops[0]) > top.index(loop) or top.index(ops[1]) < top.index(loop):
            self._fail("expected zero(acc) before the loop and store(C, acc) after it, nothing else")
        fill, store = ops
        acc = fill.outs[0]
        if _text(fill.attrs.get("value", 1)) not in ("0", "0.0") or acc.kind != "reg" or acc.dtype.name != "f32":
            self._fail("the accumulator must be an f32 register tile zeroed before the loop")
        body = [n for n in loop.body]
        if any(isinstance(n, ir.Loop) for n in body) or [n.name for n in body] != ["load_async", "load_async", "wait", "mma"]:
            self._fail("the loop body must be load_async(a), load_async(b), wait(both), mma(acc, a, b)")
        la, lb, wait, mma = body
        a, b = la.outs[0], lb.outs[0]
        va, vb = la.ins[0], lb.ins[0]
        A, B, C = (p for p in k.params)
        if va.param is not A or vb.param is not B or va.index != (None, None) or vb.index != (None, None):
            self._fail("load_async must read whole 2-D views A[:, :] and B[:, :]")
        if set(wait.attrs["tokens"]) != {la.attrs["token"], lb.attrs["token"]}:
            self._fail("the wait must cover both loads")
        if mma.outs[0] is not acc or mma.ins != [a, b] or mma.attrs.get("ta") or mma.attrs.get("tb") or not mma.attrs.get("accumulate", True):
            self._fail("expected mma(acc, a, b) accumulating, without transposes")
        if store.ins[0] is not acc or store.ins[1].param is not C or store.ins[1].index != (None, None):
            self._fail("expected store(C[:, :], acc, ...)")
        BM, BK = a.shape
        BK2, BN = b.shape
        if BK2 != BK or acc.shape != (BM, BN):
            self._fail(f"tile shapes disagree: a {a.shape}, b {b.shape}, acc {acc.shape}")
        kb = self.sym_name(loop.index)
        want_k = f"{loop.index.name} * {BK}"
        if _text(la.attrs["col"]) != want_k or _text(lb.attrs["row"]) != want_k:
            self._fail(f"the loads must step K as kb*{BK}: got A col {_text(la.attrs['col'])}, B row {_text(lb.attrs['row'])}")
        if _text(loop.start) != "0" or _text(loop.stop) != f"cdiv({A.name}.shape1, {BK})":
            self._fail(f"the loop must run over cdiv(K, {BK}) tiles from 0")
        if _text(la.attrs["row"]) != _text(store.attrs["row"]) or _text(lb.attrs["col"]) != _text(store.attrs["col"]):
            self._fail("A's rows and B's columns must be the stored tile's origin")
        for e in (store.attrs["row"], store.attrs["col"]):
            bad = [s.name for s in _syms(e) if s.kind not in ("pid", "dim")]
            if bad:
                self._fail(f"the tile origin may depend on program ids and sizes only, not {bad}")
        if A.dtype.name not in ("bf16", "f16") or B.dtype != A.dtype:
            raise LoweringError(f"cdna: GEMM inputs must both be bf16 or both f16, got A {A.dtype}, B {B.dtype}")
        if C.dtype.name not in ("bf16", "f16", "f32"):
            raise LoweringError(f"cdna: GEMM output must be bf16, f16 or f32, got {C.dtype}")
        return dict(A=A, B=B, C=C, BM=BM, BN=BN, BK=BK, row0=store.attrs["row"], col0=store.attrs["col"])

    # ---------------------------------------------------------------- rendering
    def arg_decl(self, kind, x) -> str:
        if kind == "ptr":
            return f"{'void' if x.name == self.k.params[2].name else 'const u16'}* __restrict__ {x.name}"
        return f"int {self.sym_name(x)}"

    def lower(self) -> Lowered:
        g = self.match_gemm()
        A, B, C = g["A"], g["B"], g["C"]
        try:
            cfg = gemm_probe.gemm_config(self.arch, A.dtype.name, C.dtype.name, bm=g["BM"], bn=g["BN"], bk=g["BK"], **self.options)
        except ValueError as e:
            raise LoweringError(f"cdna: GEMM tile {g['BM']}x{g['BN']}x{g['BK']} on {self.arch}: {e}") from None
        sched = cfg.schedule()
        from . import schedule as sch

        sch.check(sched)
        args = self.launch_args()
        name = f"tiles_{self.k.name}_{self.arch}_{A.dtype.name}_{C.dtype.name}_{g['BM']}x{g['BN']}x{g['BK']}"
        n = self.sym_name
        dims = dict(M=n(A.dims[0]), K=n(A.dims[1]), N=n(B.dims[1]), lda=n(A.strides[0]), ldb=n(B.strides[0]), ldc=n(C.strides[0]))
        source = self.env.get_template("gemm_ir.hip.j2").render(
            cfg=cfg, schedule=sched, schedule_text=sched.describe(), name=name, template_version=TEMPLATE_VERSION,
            ir_name=self.k.name, ir_text=self.k.text(), arg_decls=[self.arg_decl(kd, x) for kd, x in args], dims=dims,
            grid=self.expr(self.k.grid[0]), row0=self.expr(g["row0"]), col0=self.expr(g["col0"]))
        requires = [f"{p.name}.stride1 == 1" for p in (A, B, C)] + [
            f"{A.name}.shape1 % 8 == 0 (K)", f"{B.name}.shape1 % 8 == 0 (N)", f"{A.name}.stride0 % 8 == 0",
            f"{B.name}.stride0 % 8 == 0", "A, B, C 16-byte aligned", f"{B.name}.shape0 == {A.name}.shape1",
            f"{C.name}.shape0 == {A.name}.shape0", f"{C.name}.shape1 == {B.name}.shape1",
            "each of A, B, C spans < 2 GiB (32-bit buffer offsets)"]
        return Lowered(kernel=self.k, backend="cdna", arch=self.arch, entry=name, source=source, block=(THREADS, 1, 1),
                       shared_bytes=0, args=args, headers=header_files(INCLUDE_DIR),
                       notes={"config": cfg, "schedule": sched.name, "lds_bytes": cfg.lds_bytes, "requires": requires,
                              "template_version": TEMPLATE_VERSION})


def _syms(e) -> List[ir.Sym]:
    e = ir.as_expr(e)
    if isinstance(e, ir.Sym):
        return [e]
    if isinstance(e, ir.Bin):
        return _syms(e.a) + _syms(e.b)
    return []


def check_gemm_args(M: int, N: int, K: int, lda: int, ldb: int, ldc: int, ptrs=(), strides_inner=(1, 1, 1),
                    elem_out: int = 4) -> None:
    """The run-time contract of the lowered GEMM (what ``Lowered.notes['requires']`` lists), as ValueErrors
    naming the argument; a launcher calls this before any launch."""
    if any(s != 1 for s in strides_inner):
        raise ValueError(f"cdna gemm: innermost strides must be 1, got {tuple(strides_inner)}")
    if K % 8 or N % 8:
        raise ValueError(f"cdna gemm: K and N must be multiples of 8 (16-byte vectors), got K={K}, N={N}; pad them")
    if lda % 8 or ldb % 8:
        raise ValueError(f"cdna gemm: row strides of A and B must be multiples of 8 elements, got {lda}, {ldb}")
    for name, p in zip("ABC", ptrs):
        if p % 16:
            raise ValueError(f"cdna gemm: {name} must be 16-byte aligned, its address is {p:#x}")
    for name, rows, ld, eb in (("A", M, lda, 2), ("B", K, ldb, 2), ("C", M, ldc, elem_out)):
        if rows * ld * eb >= 2**31:
            raise ValueError(f"cdna gemm: {name} spans {rows * ld * eb} bytes; buffer offsets are 32-bit (< 2 GiB)")
