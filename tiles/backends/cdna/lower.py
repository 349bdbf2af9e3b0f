"""IR -> CDNA HIP: the GEMM kernel (tiles/kernels/gemm.py) lowered onto the GEMM template.

The lowering recognises the IR of a tiled GEMM main loop and checks every assumption the template makes:
one f32 register accumulator zeroed before a pipelined loop over K tiles; in the loop, `load_async` of an
A tile (rows = the tile row, cols = kb*BK) and of a B tile (rows = kb*BK, cols = the tile column), a
`wait` on both, and `mma(acc, a, b)`; after it, `store` of the accumulator at the same tile origin.
Then the template's memory / compute clusters (the 8-wave ping-pong of schedule.py) implement that loop,
and only the kernel signature and the tile origin come from the IR (templates/gemm_ir.hip.j2).

Overlap patterns: ProducerConsumer, PingPong and Pipelined map to the 8-wave ping-pong (ARCHITECTURE.md:
wave specialisation loses on CDNA without register reallocation). Interleave maps to the 4-wave interleave
(schedule.interleave_gemm; templates/gemm_interleave_ir.hip.j2): one wave per SIMD with 512 registers,
MFMAs / LDS reads / global loads interleaved by sched_group_barrier.
Anything else raises LoweringError naming what would work.
"""
from __future__ import annotations

from typing import Dict, Optional

from tiles.core import ir
from tiles.core.lowering import Lowered, Lowering, LoweringError, check_gemm_dtypes, header_files, match_tiled_gemm
from tiles.core.patterns import Interleave

from . import gemm_probe
from .gemm_probe import INCLUDE_DIR, TEMPLATE_DIR, TEMPLATE_VERSION

THREADS = gemm_probe.THREADS
DEFAULT_ARCH = "gfx942"



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
        g = match_tiled_gemm(k, self._fail)
        check_gemm_dtypes("cdna", g)
        return g

    # ---------------------------------------------------------------- rendering
    def arg_decl(self, kind, x) -> str:
        if kind == "ptr":
            return f"{'void' if x.name == self.k.params[2].name else 'const u16'}* __restrict__ {x.name}"
        return f"int {self.sym_name(x)}"

    def lower(self) -> Lowered:
        g = self.match_gemm()
        A, B, C = g["A"], g["B"], g["C"]
        interleave = isinstance(self.k.pattern, Interleave)  # 4-wave interleave, else the 8-wave ping-pong
        make_config = gemm_probe.interleave_config if interleave else gemm_probe.gemm_config
        try:
            cfg = make_config(self.arch, A.dtype.name, C.dtype.name, bm=g["BM"], bn=g["BN"], bk=g["BK"], **self.options)
        except ValueError as e:
            raise LoweringError(f"cdna: GEMM tile {g['BM']}x{g['BN']}x{g['BK']} on {self.arch}"
                                f"{' (4-wave Interleave)' if interleave else ''}: {e}") from None
        sched = cfg.schedule()
        from . import schedule as sch

        sch.check(sched)
        args = self.launch_args()
        name = f"tiles_{self.k.name}_{self.arch}_{A.dtype.name}_{C.dtype.name}_{g['BM']}x{g['BN']}x{g['BK']}"
        n = self.sym_name
        dims = dict(M=n(A.dims[0]), K=n(A.dims[1]), N=n(B.dims[1]), lda=n(A.strides[0]), ldb=n(B.strides[0]), ldc=n(C.strides[0]))
        if interleave:
            name = name.replace(f"tiles_{self.k.name}_", f"tiles_{self.k.name}_interleave_", 1)
        source = self.env.get_template("gemm_interleave_ir.hip.j2" if interleave else "gemm_ir.hip.j2").render(
            cfg=cfg, schedule=sched, schedule_text=sched.describe(), name=name, template_version=TEMPLATE_VERSION,
            ir_name=self.k.name, ir_text=self.k.text(), arg_decls=[self.arg_decl(kd, x) for kd, x in args], dims=dims,
            grid=self.expr(self.k.grid[0]), row0=self.expr(g["row0"]), col0=self.expr(g["col0"]),
            sched_groups=gemm_probe.sched_groups, issue_order=cfg.issue_order() if interleave else [])
        requires = [f"{p.name}.stride1 == 1" for p in (A, B, C)] + [
            f"{A.name}.shape1 % 8 == 0 (K)", f"{B.name}.shape1 % 8 == 0 (N)", f"{A.name}.stride0 % 8 == 0",
            f"{B.name}.stride0 % 8 == 0", "A, B, C 16-byte aligned", f"{B.name}.shape0 == {A.name}.shape1",
            f"{C.name}.shape0 == {A.name}.shape0", f"{C.name}.shape1 == {B.name}.shape1",
            "each of A, B, C spans < 2 GiB (32-bit buffer offsets)"]
        return Lowered(kernel=self.k, backend="cdna", arch=self.arch, entry=name, source=source, block=(cfg.threads, 1, 1),
                       shared_bytes=0, args=args, headers=header_files(INCLUDE_DIR),
                       notes={"config": cfg, "schedule": sched.name, "lds_bytes": cfg.lds_bytes, "requires": requires,
                              "template_version": TEMPLATE_VERSION})



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
