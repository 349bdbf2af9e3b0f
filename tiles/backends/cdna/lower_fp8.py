"""IR -> CDNA HIP: the block-scaled fp8 GEMM (tiles/kernels/gemm_fp8.py) on templates/gemm_fp8.hip.j2.

The lowering recognises the tile program and checks each assumption the template makes (the same shape the
Hopper lowering recognises):

* f32 register tiles `acc` (zeroed before the loop) and `part`; one pipelined loop over cdiv(K, BK);
* in it: load_async of A (row R, col kb*BK) and of B (row Cn, col kb*BK), one wait, load(sa, SA[:, kb], row=R),
  load(sb, SB[n, :, kb]), mma(part, a, b, tb=True, accumulate=False), mul_row(part, part, sa),
  mul_col(part, part, sb), add(acc, acc, part); after it store(C[:, :], acc, row=R, col=Cn);
* BK = BN = 128 (one promotion per scale block, one B scale per tile and K block).

CDNA's MFMAs read both operands k-contiguous, so A (M, K) and B (N, K) go to LDS as they are stored (no
transpose); the four ops after the mma become one fused promotion acc += part * (sa[row] * sb) per K block.
Schedule: a register-staged double buffer with one s_barrier per K block on 4 waves (2 x 2 over the tile),
not the 8-wave ping-pong of the bf16 GEMM (see the template's header). The 8-bit format is the arch's:
gfx942 e4m3fnuz (v_mfma_f32_*_fp8_fp8), gfx950 OCP e4m3fn (v_mfma_scale_f32_*_f8f6f4 with unit scales). The
generated code only moves bytes into the MFMA, so it is the same for either torch dtype; the launch path
(backend.check_fp8, check_fp8_args) refuses the other vendor's format.

Run-time contract (check_fp8_args): A, B k-contiguous with rows on 16-byte boundaries (lda, ldb % 16 == 0, 16-byte
aligned base; the launcher copies an operand that is not), C innermost stride 1, each of A, B, C < 2 GiB.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, Optional

import torch

from tiles.core import ir
from tiles.core.lowering import Lowered, Lowering, LoweringError, header_files, match_block_scaled_gemm

from . import layouts
from .gemm_probe import INCLUDE_DIR, LDS_LIMIT, OUT_BYTES, TEMPLATE_DIR

TEMPLATE_VERSION = "cdna-gemm-fp8-1"
THREADS = 256  # 4 waves, 2 x 2 over the output tile
SCALE_BLOCK = 128
FORMATS = {"gfx942": torch.float8_e4m3fnuz, "gfx950": torch.float8_e4m3fn}
FORMAT_NAMES = {"gfx942": "e4m3fnuz", "gfx950": "OCP e4m3fn"}
DEFAULTS = dict(mf=32, chunk=64)


def fp8_mfma(arch: str, mf: int) -> str:
    """The ISA mnemonic of the fp8 MFMA the arch layer issues for a 32-byte step (llvm-objdump spelling)."""
    if arch == "gfx950":
        return {32: "v_mfma_scale_f32_32x32x64_f8f6f4", 16: "v_mfma_scale_f32_16x16x128_f8f6f4"}[mf]
    return {32: "v_mfma_f32_32x32x16_fp8_fp8", 16: "v_mfma_f32_16x16x32_fp8_fp8"}[mf]


def accesses(mf: int, bm: int, bn: int, bk: int, threads: int):
    """Every LDS instruction of the template on the A and B tiles (bm / bn rows of bk bytes): the operand
    ds_read_b128 of load_op8 and the ds_write_b128 of store_stage8. In bytes they are the 16-bit GEMM's
    patterns of a tile with bk-byte rows: a lane reads 16 bytes at byte 16 (l / mf) of a k-slab of
    16 * 64 / mf bytes, and thread t writes the 16-byte chunk t % (bk / 16) of row t / (bk / 16)."""
    return [("read_b128", "ds_read_b128",
             lambda sw: (p for rows in (bm, bn) for p in layouts.operand_read_patterns(sw, mf, rows, bk))),
            ("write_b128", "ds_write_b128",
             lambda sw: (p for rows in (bm, bn) for p in layouts.stage_write_patterns(sw, rows, bk, threads)))]


def _candidates():
    yield layouts.Swizzle()
    for s1 in range(0, 5):
        yield layouts.Swizzle(s1, None, 7)
        for s2 in range(s1 + 1, 6):
            yield layouts.Swizzle(s1, s2, 7)


@lru_cache(maxsize=None)
def fp8_swizzle(arch: str, mf: int, bm: int, bn: int, bk: int, threads: int = THREADS):
    """(swizzle, conflicts): the simplest line-local XOR swizzle (st8 in fp8.h) under which every LDS access of
    the template is conflict-free under the bank model, else the one with the fewest extra cycles."""
    acc = accesses(mf, bm, bn, bk, threads)
    best = None
    for sw in _candidates():
        if not all(layouts.swizzle_is_permutation(sw, r, bk) for r in (bm, bn)):
            continue
        c = layouts.access_conflicts(arch, acc, sw)
        if sum(c.values()) == 0:
            return sw, c
        if best is None or sum(c.values()) < sum(best[1].values()):
            best = (sw, c)
    return best


@dataclass(frozen=True)
class Fp8Config:
    arch: str
    dtype_out: str
    bm: int
    bn: int
    bk: int
    mf: int = 32
    chunk: int = 64
    num_xcds: int = 8
    threads: int = THREADS

    @property
    def wm(self) -> int:
        return self.bm // 2

    @property
    def wn(self) -> int:
        return self.bn // 2

    @property
    def lds_bytes(self) -> int:
        return 2 * (self.bm + self.bn) * self.bk

    @property
    def out_bytes(self) -> int:
        return OUT_BYTES[self.dtype_out]

    @property
    def fp8_format(self) -> str:
        return FORMAT_NAMES[self.arch]

    @property
    def mfma_mnemonic(self) -> str:
        return fp8_mfma(self.arch, self.mf)

    @property
    def mfma_per_step(self) -> int:  # hardware MFMAs per 32-byte step (arch.h mfma32_fp8 / mfma16_fp8)
        return 1 if self.arch == "gfx950" else 4

    @property
    def mfma_per_block(self) -> int:  # per wave and K block
        step = 2 * 16 * 64 // self.mf
        return (self.wm // self.mf) * (self.wn // self.mf) * (self.bk // step) * self.mfma_per_step

    @property
    def loads_per_block(self) -> int:  # buffer_load_dwordx4 per thread and K block (A and B stages)
        return (self.bm + self.bn) * self.bk // 16 // self.threads

    @property
    def swizzle(self):
        return fp8_swizzle(self.arch, self.mf, self.bm, self.bn, self.bk, self.threads)[0]

    @property
    def conflicts(self) -> Dict[str, int]:
        return fp8_swizzle(self.arch, self.mf, self.bm, self.bn, self.bk, self.threads)[1]

    @property
    def swizzle_args(self) -> str:
        sw = self.swizzle
        return f"{sw.s1}, {31 if sw.s2 is None else sw.s2}, {sw.mask}"

    def grid(self, M: int, N: int) -> int:
        return -(-M // self.bm) * -(-N // self.bn)


def fp8_config(arch: str, dtype_out: str = "bf16", bm: int = 128, bn: int = 128, bk: int = 128, **options) -> Fp8Config:
    """The template's configuration, validated (clear ValueErrors before any compiler runs)."""
    if arch not in FORMATS:
        raise ValueError(f"arch: got {arch!r}; the CDNA fp8 GEMM supports {tuple(FORMATS)}")
    if dtype_out not in ("bf16", "f32"):
        raise ValueError(f"dtype_out: got {dtype_out!r}; the fp8 GEMM writes bf16 or f32")
    unknown = set(options) - set(DEFAULTS) - {"num_xcds"}
    if unknown:
        raise ValueError(f"unknown fp8 GEMM option(s) {sorted(unknown)}; known: {sorted(DEFAULTS)} + num_xcds")
    c = Fp8Config(arch, dtype_out, bm, bn, bk, **{**DEFAULTS, **options})
    if c.mf not in (16, 32):
        raise ValueError(f"mf: got {c.mf}; the fp8 MFMA base is 16 or 32")
    if bk != SCALE_BLOCK or bn != SCALE_BLOCK:
        raise ValueError(f"BK and BN must be {SCALE_BLOCK} (the scale block: one promotion per K block, one B scale "
                         f"per tile), got BK={bk}, BN={bn}")
    if bm % (2 * c.mf) or bm < 2 * c.mf:
        raise ValueError(f"BM must be a multiple of {2 * c.mf} (2 waves of {c.mf}-row MFMA blocks), got {bm}")
    if (bm * bk // 16) % c.threads:
        raise ValueError(f"the A stage ({bm}x{bk} bytes) must split into whole 16-byte loads per thread")
    if c.lds_bytes > LDS_LIMIT[arch]:
        raise ValueError(f"LDS: {bm}x{bn}x{bk} fp8 double-buffered needs {c.lds_bytes} bytes; {arch} has {LDS_LIMIT[arch]}")
    if c.chunk < 1:
        raise ValueError("chunk must be >= 1")
    return c


class CDNAFp8GemmLowering(Lowering):
    backend = "cdna"
    template_dir = TEMPLATE_DIR
    int_call = {"min": "imin({a}, {b})", "max": "imax({a}, {b})", "cdiv": "cdiv({a}, {b})"}

    def __init__(self, kernel: ir.Kernel, arch: Optional[str] = None, **options):
        super().__init__(kernel, arch or "gfx942")
        self.options = options

    def _fail(self, why: str):
        raise LoweringError(f"cdna: kernel {self.k.name!r} is not the scaled fp8 GEMM (block or row-wise scales) "
                            f"templates/gemm_fp8.hip.j2 implements: {why}")

    def match(self) -> dict:
        A, B = self.k.params[0], self.k.params[1]
        if len(self.k.params) == 5 and (A.dtype.name not in ("f8e4m3", "f8e4m3fnuz") or B.dtype != A.dtype):
            raise LoweringError(f"cdna: fp8 GEMM inputs must both be 8-bit e4m3 floats; got A {A.dtype}, B {B.dtype}")
        return match_block_scaled_gemm(self.k, self._fail)

    def arg_decl(self, kind, x) -> str:
        if kind == "ptr":
            A, B, SA, SB, C = self.k.params
            t = {A.name: "const unsigned char", B.name: "const unsigned char", SA.name: "const float",
                 SB.name: "const float", C.name: "void"}[x.name]
            return f"{t}* __restrict__ {x.name}"
        return f"int {self.sym_name(x)}"

    def lower(self) -> Lowered:
        g = self.match()
        A, B, SA, SB, C = g["A"], g["B"], g["SA"], g["SB"], g["C"]
        try:
            cfg = fp8_config(self.arch, C.dtype.name, bm=g["BM"], bn=g["BN"], bk=g["BK"], **self.options)
        except ValueError as e:
            raise LoweringError(f"cdna: fp8 GEMM tile {g['BM']}x{g['BN']}x{g['BK']} on {self.arch}: {e}") from None
        args = self.launch_args()
        n = self.sym_name
        rowwise = g["scaling"] == "row"
        dims = dict(M=n(A.dims[0]), K=n(A.dims[1]), N=n(B.dims[0]), lda=n(A.strides[0]), ldb=n(B.strides[0]),
                    ldc=n(C.strides[0]), sa0=n(SA.strides[0]), sa1=n(SA.strides[1]), nb=n(SB.dims[0]),
                    sb0=n(SB.strides[0]), sb1=n(SB.strides[1]) if rowwise else None,
                    sb2=None if rowwise else n(SB.strides[2]))
        name = f"tiles_{self.k.name}_{self.arch}_{C.dtype.name}_{g['BM']}x{g['BN']}x{g['BK']}_mf{cfg.mf}"
        source = self.env.get_template("gemm_fp8.hip.j2").render(
            cfg=cfg, name=name, template_version=TEMPLATE_VERSION, rowwise=rowwise, ir_name=self.k.name, ir_text=self.k.text(),
            arg_decls=[self.arg_decl(kd, x) for kd, x in args], dims=dims, grid=self.expr(self.k.grid[0]),
            row0=self.expr(g["row0"]), col0=self.expr(g["col0"]), A=A.name, B=B.name, SA=SA.name, SB=SB.name, C=C.name)
        requires = [f"{A.name}.stride1 == 1", f"{B.name}.stride1 == 1", f"{C.name}.stride1 == 1",
                    f"{A.name}.stride0 % 16 == 0", f"{B.name}.stride0 % 16 == 0", "A, B 16-byte aligned",
                    f"A and B in the arch's 8-bit format ({cfg.fp8_format})",
                    "each of A, B, C spans < 2 GiB (32-bit buffer offsets)"]
        return Lowered(kernel=self.k, backend="cdna", arch=self.arch, entry=name, source=source, block=(cfg.threads, 1, 1),
                       shared_bytes=0, args=args, headers=header_files(INCLUDE_DIR),
                       notes={"config": cfg, "schedule": "register-staged double buffer, 4 waves",
                              "lds_bytes": cfg.lds_bytes, "requires": requires, "template_version": TEMPLATE_VERSION,
                              "lowering": "fp8"})


# ----------------------------------------------------------------------------- launching


def check_fp8(name: str, dtype: torch.dtype, arch: str) -> None:
    """The arch's 8-bit format, as a TypeError naming the argument: gfx942's MFMAs read e4m3fnuz, gfx950's OCP e4m3fn."""
    want = FORMATS.get(arch)
    if want is None or dtype == want:
        return
    other = "gfx950's and NVIDIA Hopper's" if dtype == torch.float8_e4m3fn else "AMD gfx942's"
    raise TypeError(f"{name} has dtype {str(dtype).replace('torch.', '')}; the CDNA backend's fp8 GEMM on {arch} takes "
                    f"{str(want).replace('torch.', '')} ({FORMAT_NAMES[arch]}); {str(dtype).replace('torch.', '')} is "
                    f"{other} format (convert with x.float().to({want}))")


def operands(A: torch.Tensor, B: torch.Tensor):
    """A and B as the template reads them: k-contiguous rows starting on 16-byte boundaries (a copy when not).
    A single row too: its view spans rows x stride bytes and is read in 16-byte vectors, so a row of K
    bytes (M = 1, K not a multiple of 16) would leave its last vector outside the view, read as zeros."""
    out = []
    for t in (A, B):
        ok = (t.shape[1] <= 1 or t.stride(1) == 1) and t.stride(0) % 16 == 0 and t.data_ptr() % 16 == 0
        if not ok:
            cols = -(-t.shape[1] // 16) * 16
            p = torch.zeros((t.shape[0], max(cols, 16)), dtype=t.dtype, device=t.device)
            p[:, : t.shape[1]] = t
            t = p[:, : t.shape[1]]
        out.append(t)
    return out


class Argv(list):
    """Launch arguments that keep alive the tensors their pointers point into (operands copied by `operands`)."""

    def __init__(self, values, keep):
        super().__init__(values)
        self.keep = keep


def check_fp8_args(A, B, SA, SB, C, arch: str) -> None:
    """The run-time contract of the lowered fp8 GEMM (Lowered.notes['requires']), as errors naming the argument."""
    check_fp8("a", A.dtype, arch)
    check_fp8("b", B.dtype, arch)
    for name, t in (("A", A), ("B", B)):
        if t.shape[1] > 1 and t.stride(1) != 1:
            raise ValueError(f"cdna gemm_fp8: {name} must be k-contiguous (stride(1) == 1), got strides {tuple(t.stride())}")
        if t.shape[0] > 1 and t.stride(0) % 16:
            raise ValueError(f"cdna gemm_fp8: {name}'s row stride must be a multiple of 16 bytes, got {t.stride(0)}")
        if t.data_ptr() % 16:
            raise ValueError(f"cdna gemm_fp8: {name} must be 16-byte aligned, its address is {t.data_ptr():#x}")
    if C.shape[1] > 1 and C.stride(1) != 1:
        raise ValueError(f"cdna gemm_fp8: C's innermost stride must be 1, got {C.stride(1)}")
    for name, t in (("A", A), ("B", B), ("C", C)):
        span = ((t.shape[0] - 1) * t.stride(0) + t.shape[1]) * t.element_size() if t.numel() else 0
        if span >= 2**31:
            raise ValueError(f"cdna gemm_fp8: {name} spans {span} bytes; buffer offsets are 32-bit (< 2 GiB)")
