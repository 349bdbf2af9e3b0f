"""CDNA register-fragment layouts, LDS swizzles and the LDS bank model, as data.

Everything the CDNA lowering, the device headers, the docs figures and the tests need to know about
*where an element lives* is described here once:

* ``FRAGMENTS``: for every MFMA instruction we use, on every arch, and for each operand (A, B, C/D),
  the map (lane, element) -> (row, col) of the instruction's matrices. A and B elements are 16-bit
  values (element e sits in VGPR e // 2, half e % 2); C/D elements are 32-bit registers.
* ``LOGICAL``: the layout the device headers (``rt.h``) actually use, which is arch-neutral: a lane
  holds 8 consecutive k values (16 bytes, one ``ds_read_b128``). On gfx950 that *is* one
  32x32x16 / 16x16x32 MFMA. On gfx942 it is two 32x32x8 / 16x16x16 MFMAs (elements 0-3, then 4-7);
  the k order differs from the hardware's, but identically for A and B, so the sum is the same
  (``logical_is_valid`` proves it from the tables).
* swizzles of LDS tiles, and the bank model (``BANK_MODELS``) with ``bank_conflicts``.

Sources (facts, not code, were taken from them):

* gfx9 MFMA register layouts: AMD Matrix Instruction Calculator (github ROCm/amd_matrix_instruction_calculator,
  matrix_calculator.py, class for CDNA1-3: ``__get_input_reg_lanes`` / ``__get_output_reg_lanes``):
  input: ``kl = K / (64 / M)`` consecutive k per lane, ``lane = i + M * (k // kl)``, element ``k % kl``;
  32-bit output: 4-row groups, ``reg = 4 * (i // (4 * 64/N)) + i % 4``, ``lane = N * ((i // 4) % (64/N)) + j``.
  The calculator (v1.3.2) stops at CDNA3; the gfx950 K-doubled bf16/f16 MFMAs use the same algorithm with
  8 values per lane (CDNA4 ISA guide section 7; HipKittens' ``rt_16x32`` / ``rt_32x16`` shapes with
  stride 8 encode the same thing).
* LDS banks and phases: gfx950 (MI355X) from HipKittens' measurements
  (HazyResearch/HipKittens ``analysis/paper_experiments/phases/*/phase_results.txt`` and
  ``bank_results.txt``, built with ``GPU_TARGET=CDNA4``). gfx942 (MI300X): 32 banks of 4 bytes
  (CK-Tile docs, "Understanding AMD GPU LDS and Bank Conflicts": ``ds_write_b128`` is served in 8 phases
  of 8 consecutive lanes, and reads likewise); the b64/b32 phase splits for gfx942 follow from 128 bytes
  per clock and are marked ``derived``.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

WAVE = 64
ARCHS = ("gfx942", "gfx950")

# ----------------------------------------------------------------------------- MFMA fragments


@dataclass(frozen=True)
class Fragment:
    """One operand of one MFMA: ``table[lane][elem] = (row, col)`` of the operand's matrix.

    For A (M x K): row = i, col = k. For B (K x N): row = k, col = j. For C/D (M x N): (i, j).
    """

    instr: str
    operand: str  # "A" | "B" | "C"
    rows: int
    cols: int
    elems: int  # per lane: 16-bit values for A/B, 32-bit registers for C/D
    table: Tuple[Tuple[Tuple[int, int], ...], ...]

    def coord(self, lane: int, elem: int) -> Tuple[int, int]:
        return self.table[lane][elem]

    def inverse(self) -> Dict[Tuple[int, int], Tuple[int, int]]:
        inv = {}
        for lane, row in enumerate(self.table):
            for e, rc in enumerate(row):
                inv[rc] = (lane, e)
        return inv

    def is_bijection(self) -> bool:
        cells = [rc for row in self.table for rc in row]
        full = {(r, c) for r in range(self.rows) for c in range(self.cols)}
        return len(cells) == len(set(cells)) == self.rows * self.cols and set(cells) == full


@dataclass(frozen=True)
class Mfma:
    arch: str
    name: str  # ISA mnemonic stem, as llvm-objdump prints it (dtype suffix added by `mnemonic`)
    builtin: str  # clang builtin, with {t} for the dtype spelling
    m: int
    n: int
    k: int
    a: Fragment
    b: Fragment
    c: Fragment
    cycles: int  # pass count x 4, from the calculator (gfx942) / CDNA4 guide (gfx950)

    def mnemonic(self, dtype: str) -> str:
        return f"v_mfma_f32_{self.m}x{self.n}x{self.k}_{dtype}"


def _input_frag(instr: str, operand: str, m: int, k: int) -> Fragment:
    kl = k // (WAVE // m)  # consecutive k values held by one lane
    table = []
    for lane in range(WAVE):
        i, kg = lane % m, lane // m
        cells = []
        for e in range(kl):
            kk = kg * kl + e
            cells.append((i, kk) if operand == "A" else (kk, i))
        table.append(tuple(cells))
    rows, cols = (m, k) if operand == "A" else (k, m)
    return Fragment(instr, operand, rows, cols, kl, tuple(table))


def _output_frag(instr: str, m: int, n: int) -> Fragment:
    per_reg = WAVE // n  # 4-row groups that share one register
    nregs = m * n // WAVE
    table = []
    for lane in range(WAVE):
        cells = []
        for r in range(nregs):
            i = 4 * per_reg * (r // 4) + 4 * (lane // n) + r % 4
            cells.append((i, lane % n))
        table.append(tuple(cells))
    return Fragment(instr, "C", m, n, nregs, tuple(table))


def _mfma(arch, m, n, k, cycles):
    name = f"mfma_f32_{m}x{n}x{k}"
    builtin = (
        f"__builtin_amdgcn_mfma_f32_{m}x{n}x{k}{{t}}_1k" if arch == "gfx942" else f"__builtin_amdgcn_mfma_f32_{m}x{n}x{k}_{{t}}"
    )
    return Mfma(arch, name, builtin, m, n, k, _input_frag(name, "A", m, k), _input_frag(name, "B", n, k),
                _output_frag(name, m, n), cycles)


# (arch, shape) -> instruction. shape 32 = 32x32 output base, 16 = 16x16 base.
MFMA: Dict[Tuple[str, int], Mfma] = {
    ("gfx942", 32): _mfma("gfx942", 32, 32, 8, 64),
    ("gfx942", 16): _mfma("gfx942", 16, 16, 16, 32),
    ("gfx950", 32): _mfma("gfx950", 32, 32, 16, 64),
    ("gfx950", 16): _mfma("gfx950", 16, 16, 32, 32),
}
# NB on gfx942 the f16 builtins have no "_1k" suffix (__builtin_amdgcn_mfma_f32_32x32x8f16); arch.h spells
# them. The ISA mnemonics are v_mfma_f32_32x32x8_bf16 / _f16 (llvm-objdump 19 and 22).


# ----------------------------------------------------------------------------- the logical (header) layout


@dataclass(frozen=True)
class Logical:
    """What rt.h holds: per 16-byte chunk, lane l has row ``l % mf`` and k = ``8 * (l // mf) + e``, e < 8,
    of a k-slab of ``kslab = 8 * 64 / mf`` values (16 for 32x32, 32 for 16x16)."""

    mf: int

    @property
    def kslab(self) -> int:
        return 8 * WAVE // self.mf

    def operand(self, lane: int, e: int) -> Tuple[int, int]:
        """(row-of-operand, k) of element e (0..7) of lane."""
        return lane % self.mf, 8 * (lane // self.mf) + e

    def acc(self, lane: int, reg: int) -> Tuple[int, int]:
        """Accumulator element: same as the hardware C/D layout (both archs)."""
        return MFMA[("gfx950", self.mf)].c.coord(lane, reg)


def logical_split(arch: str, mf: int) -> List[List[Tuple[int, int, int]]]:
    """For each MFMA issued per logical chunk: [(lane, logical elem, hw elem)] mapping of operand values."""
    hw = MFMA[(arch, mf)]
    per = hw.a.elems  # 4 on gfx942, 8 on gfx950
    calls = []
    for c in range(8 // per):
        calls.append([(lane, c * per + e, e) for lane in range(WAVE) for e in range(per)])
    return calls


def logical_is_valid(arch: str, mf: int) -> bool:
    """True when the MFMAs issued by arch.h for one logical chunk compute sum_k A[i][k] B[j][k] over the
    whole k-slab: every (i, j, k) product appears exactly once, for A and B taken from the same lane/elem
    positions (the hardware's k labels may differ from the logical ones, as long as A and B agree)."""
    hw = MFMA[(arch, mf)]
    lg = Logical(mf)
    seen = set()
    for call in logical_split(arch, mf):
        # hardware k of (lane, hw elem) for A and B must coincide for the pairing to be a dot product
        a_of = {}  # hw k -> logical (row, k) per operand side
        for lane, le, he in call:
            ia, ka = hw.a.coord(lane, he)  # (i, k_hw)
            kb, jb = hw.b.coord(lane, he)  # (k_hw, j)
            row, klog = lg.operand(lane, le)
            if ia != row or jb != row or ka != kb:
                return False
            a_of.setdefault(ka, set()).add(klog)
        for k_hw, klogs in a_of.items():
            # every lane that contributes k_hw carries the same logical k (so A_i and B_j pair correctly)
            if len(klogs) != 1:
                return False
            seen |= klogs
    return seen == set(range(lg.kslab))


# ----------------------------------------------------------------------------- LDS swizzles


@dataclass(frozen=True)
class Swizzle:
    """XOR swizzle of an LDS tile, in blocks of ``block`` bytes (128: one line; 256: a line pair): the tile's
    linear byte offset L (row-major) is split into blk = L // block and 16-byte chunk = (L % block) // 16,
    and the chunk becomes ``chunk ^ (((blk >> s1) ^ (blk >> s2)) & mask)``; ``s2 = None`` drops the second
    term. Working on blocks (not rows) lets 64-byte rows swap halves of a line, which the transposed
    B writes need on gfx942. 256-byte blocks let a chunk move to the other line of a line pair: gfx950's
    ds_read_b128 serves 16 lanes x 16 bytes = 64 banks = 256 bytes per phase, and a 16-row MFMA operand
    read of 256-byte rows touches only the even lines' half of the banks under any line-local XOR.
    Rendered into st.h as template arguments (s2 = 31 stands for None; the block only when it is 256)."""

    s1: int = 0
    s2: Optional[int] = None
    mask: int = 0
    block: int = 128

    @property
    def chunks(self) -> int:  # 16-byte chunks per block
        return self.block // 16

    def f(self, line: int) -> int:
        v = line >> self.s1
        if self.s2 is not None:
            v ^= line >> self.s2
        return v & self.mask

    def offset(self, row: int, col: int, row_bytes: int, elem_bytes: int = 2) -> int:
        lin = row * row_bytes + col * elem_bytes
        blk, rest = divmod(lin, self.block)
        chunk, within = divmod(rest, 16)
        return blk * self.block + ((chunk ^ self.f(blk)) * 16) + within

    def cpp_args(self) -> str:
        return f"{self.s1}, {31 if self.s2 is None else self.s2}, {self.mask}" + (f", {self.block}" if self.block != 128 else "")

    def describe(self) -> str:
        """The swizzle as the formula st.h computes, for the generated code's comments."""
        if not self.mask:
            return "not swizzled"
        v = "blk" if self.s1 == 0 else f"blk >> {self.s1}"
        if self.s2 is not None:
            v = f"({v} ^ blk >> {self.s2})"
        return f"chunk ^= {v} & {self.mask} in {self.block}-byte blocks"


IDENTITY = Swizzle()


def swizzle_is_permutation(sw: Swizzle, rows: int, row_bytes: int) -> bool:
    """Every 16-byte chunk of a rows x row_bytes tile lands on its own 16-byte slot inside the tile."""
    chunks = row_bytes // 16
    if (rows * row_bytes) % sw.block or sw.mask >= sw.chunks:
        return False
    offs = {sw.offset(r, c * 8, row_bytes) for r in range(rows) for c in range(chunks)}
    return len(offs) == rows * chunks and max(offs) < rows * row_bytes and all(o % 16 == 0 for o in offs)


# ----------------------------------------------------------------------------- LDS bank model


def _r(a, b):
    return tuple(range(a, b))


@dataclass(frozen=True)
class BankModel:
    arch: str
    instr: str
    banks: int  # 4-byte banks
    phases: Tuple[Tuple[int, ...], ...]  # lanes serviced together
    source: str
    derived: bool = False

    @property
    def width(self) -> int:
        return {"b128": 16, "b96": 12, "b64": 8, "b32": 4, "b16": 2}[self.instr.rsplit("_", 1)[1]]


_HK_B128_P0 = _r(0, 4) + _r(12, 16) + _r(20, 28)
_HK_B128_P1 = _r(4, 12) + _r(16, 20) + _r(28, 32)
_HK = "HipKittens analysis/paper_experiments/phases/{}/phase_results.txt (CDNA4, measured)"
_CK = "CK-Tile docs 'Understanding AMD GPU LDS and Bank Conflicts' (32 banks; b128 in 8 phases of 8 lanes)"

BANK_MODELS: Dict[Tuple[str, str], BankModel] = {
    ("gfx950", "ds_read_b128"): BankModel(
        "gfx950", "ds_read_b128", 64,
        (_HK_B128_P0, _HK_B128_P1, tuple(l + 32 for l in _HK_B128_P0), tuple(l + 32 for l in _HK_B128_P1)),
        _HK.format("ds_read_b128")),
    ("gfx950", "ds_read_b64"): BankModel("gfx950", "ds_read_b64", 64, (_r(0, 32), _r(32, 64)), _HK.format("ds_read_b64")),
    ("gfx950", "ds_read_b96"): BankModel(
        "gfx950", "ds_read_b96", 32,
        tuple(_r(a, a + 4) + _r(b, b + 4) for a, b in ((0, 20), (4, 16), (8, 28), (12, 24), (32, 52), (36, 48), (40, 60), (44, 56))),
        _HK.format("ds_read_b96")),
    ("gfx950", "ds_write_b64"): BankModel(
        "gfx950", "ds_write_b64", 32, tuple(_r(16 * p, 16 * p + 16) for p in range(4)), _HK.format("ds_write_b64")),
    # not measured by HK: assume the same 128-byte-per-clock write path as ds_write_b64
    ("gfx950", "ds_write_b128"): BankModel(
        "gfx950", "ds_write_b128", 32, tuple(_r(8 * p, 8 * p + 8) for p in range(8)), "assumed like gfx942", True),
    ("gfx950", "ds_write_b32"): BankModel(
        "gfx950", "ds_write_b32", 32, (_r(0, 32), _r(32, 64)), "assumed: 128 B/clk", True),
    ("gfx942", "ds_read_b128"): BankModel("gfx942", "ds_read_b128", 32, tuple(_r(8 * p, 8 * p + 8) for p in range(8)), _CK),
    ("gfx942", "ds_write_b128"): BankModel("gfx942", "ds_write_b128", 32, tuple(_r(8 * p, 8 * p + 8) for p in range(8)), _CK),
    ("gfx942", "ds_read_b64"): BankModel(
        "gfx942", "ds_read_b64", 32, tuple(_r(16 * p, 16 * p + 16) for p in range(4)), "derived: 128 B/clk", True),
    ("gfx942", "ds_write_b64"): BankModel(
        "gfx942", "ds_write_b64", 32, tuple(_r(16 * p, 16 * p + 16) for p in range(4)), "derived: 128 B/clk", True),
    ("gfx942", "ds_write_b32"): BankModel(
        "gfx942", "ds_write_b32", 32, (_r(0, 32), _r(32, 64)), "derived: 128 B/clk", True),
}


def bank_conflicts(addrs: Sequence[Optional[int]], model: BankModel) -> int:
    """Extra LDS cycles of one wave-wide access: per phase, the busiest bank serves one distinct dword
    per cycle (lanes reading the same dword share it); conflicts = sum over phases of (cycles - 1).
    ``addrs[lane]`` is the lane's byte address, or None for an inactive lane."""
    extra = 0
    for phase in model.phases:
        per_bank: Dict[int, set] = {}
        for lane in phase:
            a = addrs[lane]
            if a is None:
                continue
            for w in range(model.width // 4 or 1):
                dword = a // 4 + w
                per_bank.setdefault(dword % model.banks, set()).add(dword)
        if per_bank:
            extra += max(len(s) for s in per_bank.values()) - 1
    return extra


# ----------------------------------------------------------------------------- access patterns of the GEMM


def mfma_read_addrs(mf: int, row_bytes: int, sw: Swizzle, row_block: int = 0, slab: int = 0) -> List[int]:
    """Byte addresses of the ds_read_b128 that loads one 16-byte logical chunk of an operand tile."""
    lg = Logical(mf)
    chunks_per_slab = lg.kslab // 8
    out = []
    for lane in range(WAVE):
        row, k = lg.operand(lane, 0)
        out.append(sw.offset(row_block * mf + row, slab * lg.kslab + k, row_bytes))
    assert all(chunks_per_slab * 16 * (slab + 1) <= row_bytes for _ in [0])
    return out


def stage_write_addrs(row_bytes: int, sw: Swizzle, wave: int = 0) -> List[int]:
    """ds_write_b128 of the A (k-contiguous) stage: lane t of the block writes chunk t % cpr of row t // cpr."""
    cpr = row_bytes // 16
    out = []
    for lane in range(WAVE):
        t = wave * WAVE + lane
        out.append(sw.offset(t // cpr, (t % cpr) * 8, row_bytes))
    return out


def transposed_write_addrs(row_bytes: int, kr: int, sw: Swizzle, e: int = 0, wave: int = 0) -> List[int]:
    """ds_write_b(16*kr) of the B stage written transposed (Bt[n][k]): thread t holds kr k-rows of one
    8-wide n-vector; lane kg = t % (BK/kr) (the k group), nv = t // (BK/kr); this is write number e (n = 8nv+e)."""
    bk = row_bytes // 2
    groups = bk // kr
    out = []
    for lane in range(WAVE):
        t = wave * WAVE + lane
        kg, nv = t % groups, t // groups
        out.append(sw.offset(8 * nv + e, kg * kr, row_bytes))
    return out


# ----------------------------------------------------------------------------- every instruction of a tile
# Generators of the lane addresses of EVERY wave-wide LDS instruction a device-header function issues on one
# tile (all row blocks, k-slabs, passes, waves and write numbers), so that "conflict-free" is checked for the
# whole tile, not a sample. Inactive lanes (partial passes) are None.

Pattern = List[Optional[int]]


def operand_read_patterns(sw: Swizzle, mf: int, rows: int, row_bytes: int, perm=None) -> Iterable[Pattern]:
    """load.h load_op / load_op_perm (and mma_ABt_lds's chunks) over a whole rows x row_bytes tile: one
    ds_read_b128 per (mf-row block, k-slab); ``perm(r)``: the tile row that operand row r reads (key_perm)."""
    lg = Logical(mf)
    for rb in range(rows // mf):
        for slab in range(row_bytes // 2 // lg.kslab):
            out = []
            for lane in range(WAVE):
                row, k = lg.operand(lane, 0)
                r = rb * mf + row
                out.append(sw.offset(perm(r) if perm else r, slab * lg.kslab + k, row_bytes))
            yield out


def stage_write_patterns(sw: Swizzle, rows: int, row_bytes: int, threads: int) -> Iterable[Pattern]:
    """load.h store_stage (k-contiguous stage, ds_write_b128): pass p, wave w; thread t = p*threads + tid
    writes chunk t % cpr of row t // cpr."""
    cpr = row_bytes // 16
    total = rows * cpr
    for p in range(-(-total // threads)):
        for w in range(threads // WAVE):
            ts = [p * threads + w * WAVE + lane for lane in range(WAVE)]
            if ts[0] < total:
                yield [sw.offset(t // cpr, (t % cpr) * 8, row_bytes) if t < total else None for t in ts]


def stage_t_write_patterns(sw: Swizzle, kt: int, nt: int, kr: int, threads: int) -> Iterable[Pattern]:
    """load.h store_stage_t (ds_write_b{16 kr}) into the nt x kt tile: thread t = p*threads + tid holds kr
    k-rows (group t % (kt/kr)) of n-vector t // (kt/kr); write e stores n = 8 nv + e."""
    groups = kt // kr
    for p in range(groups * (nt // 8) // threads):
        for w in range(threads // WAVE):
            for e in range(8):
                out = []
                for lane in range(WAVE):
                    t = p * threads + w * WAVE + lane
                    out.append(sw.offset(8 * (t // groups) + e, (t % groups) * kr, 2 * kt))
                yield out


def stage_t_rows_write_patterns(sw: Swizzle, kt: int, nt: int, kr: int, threads: int) -> Iterable[Pattern]:
    """load.h store_stage_t_rows (ds_write_b128) into the kt x nt tile: write q of thread t stores row
    (t % (kt/kr)) * kr + q, columns 8 (t // (kt/kr)) .. + 8."""
    groups = kt // kr
    for p in range(groups * (nt // 8) // threads):
        for w in range(threads // WAVE):
            for q in range(kr):
                out = []
                for lane in range(WAVE):
                    t = p * threads + w * WAVE + lane
                    out.append(sw.offset((t % groups) * kr + q, 8 * (t // groups), 2 * nt))
                yield out


def transposed_write_instr(kr: int) -> str:
    return {2: "ds_write_b32", 4: "ds_write_b64", 8: "ds_write_b128"}[kr]


def worst_conflicts(arch: str, instr: str, patterns: Iterable[Pattern], stop_at_first: bool = False) -> int:
    """Max extra cycles over the patterns under the (arch, instr) bank model (stop_at_first: return the
    first nonzero count, for searches)."""
    model = BANK_MODELS[(arch, instr)]
    worst = 0
    for addrs in patterns:
        worst = max(worst, bank_conflicts(addrs, model))
        if worst and stop_at_first:
            break
    return worst


# An access family: (name, instr, patterns(sw)); the conflicts of a tile under sw are the worst per family.
Access = Tuple[str, str, "object"]


def access_conflicts(arch: str, accesses: Sequence[Access], sw: Swizzle, stop_at_first: bool = False) -> Dict[str, int]:
    res = {}
    for name, instr, pats in accesses:
        res[name] = max(res.get(name, 0), worst_conflicts(arch, instr, pats(sw), stop_at_first))
        if res[name] and stop_at_first:
            break
    return res


def best_swizzle(arch: str, accesses: Sequence[Access], tiles: Sequence[Tuple[int, int]] = ()) -> Swizzle:
    """The first (simplest) candidate under which every access family is conflict-free (and that permutes
    every (rows, row_bytes) tile in ``tiles``), else the one with the fewest extra cycles."""
    best = None
    for sw in candidate_swizzles():
        if not all(swizzle_is_permutation(sw, r, rb) for r, rb in tiles):
            continue
        if sum(access_conflicts(arch, accesses, sw, stop_at_first=True).values()) == 0:
            return sw
        c = sum(access_conflicts(arch, accesses, sw).values())
        if best is None or c < best[1]:
            best = (sw, c)
    return best[0]


def gemm_accesses(mf: int, bk: int, kr: int, bm: int = 256, bn: int = 256, threads: int = 512,
                  direct_a: bool = False) -> List[Access]:
    """Every LDS instruction of the GEMM templates (ping-pong and interleave) on the A and B^T tiles (which
    share one swizzle): operand reads of both, A's stage writes (none when A is loaded straight into LDS)
    and B's transposed writes."""
    rb = bk * 2
    acc = [("read_b128", "ds_read_b128",
            lambda sw: itertools.chain(operand_read_patterns(sw, mf, bm, rb), operand_read_patterns(sw, mf, bn, rb)))]
    if not direct_a:
        acc.append(("write_b128", "ds_write_b128", lambda sw: stage_write_patterns(sw, bm, rb, threads)))
    acc.append((f"write_b{16 * kr}_T", transposed_write_instr(kr), lambda sw: stage_t_write_patterns(sw, bk, bn, kr, threads)))
    return acc


def gemm_lds_conflicts(arch: str, mf: int, bk: int, sw: Swizzle, kr: int, bm: int = 256, bn: int = 256,
                       threads: int = 512) -> Dict[str, int]:
    """Conflict cycles of every LDS access pattern the GEMM template issues (per wave, worst case over every
    instruction of a bm x bk A tile and a bn x bk B^T tile; bn * bk = 8 * threads * kr)."""
    bn = min(bn, 8 * threads * kr // bk)  # the B tile one transposed vector per thread covers
    return access_conflicts(arch, gemm_accesses(mf, bk, kr, bm, bn, threads), sw)


def candidate_swizzles() -> Iterable[Swizzle]:
    """Simplest first: identity, line-local XORs (128-byte blocks), then line-pair XORs (256-byte blocks,
    which only gfx950's 256-byte read phases need)."""
    yield IDENTITY
    for block in (128, 256):
        mask = block // 16 - 1
        for s1 in range(0, 5):
            yield Swizzle(s1, None, mask, block)
            for s2 in range(s1 + 1, 6):
                yield Swizzle(s1, s2, mask, block)


@lru_cache(maxsize=None)
def choose_swizzle(arch: str, bk: int, kr: int, mfs: Sequence[int] = (32, 16), bm: int = 256, bn: int = 256,
                   threads: int = 512, direct_a: bool = False) -> Swizzle:
    """The first (simplest) swizzle under which every GEMM LDS access is conflict-free for all MFMA shapes."""
    bn = min(bn, 8 * threads * kr // bk)
    accesses = [a for mf in mfs for a in gemm_accesses(mf, bk, kr, bm, bn, threads, direct_a)]
    sw = best_swizzle(arch, accesses, ((bm, 2 * bk), (bn, 2 * bk)))
    if sum(access_conflicts(arch, accesses, sw).values()):
        raise ValueError(f"no conflict-free swizzle for {arch} bk={bk}")
    return sw
