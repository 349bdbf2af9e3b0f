"""Hopper wgmma register-fragment layouts and shared-memory swizzles, as data.

One description of *where an element lives*, read by the lowering, the docs figures, the tests and
the layout probe (tests/hopper/test_layout_probe.py runs a wgmma on the H200 and checks this table):

* ``acc(n)``: the fp32 accumulator D (64 x n) of ``wgmma.mma_async.m64nNk16``: thread (0..127) and
  register (0..n/2-1) -> (row, col).
* ``a_frag()``: the 16-bit A operand (64 x 16) when A comes from registers: thread and element (0..7;
  element e sits in 32-bit register e // 2, low half when e is even) -> (row, col).
* ``rt_coord``: the order the device headers' register tiles (include/tiles/rt.h) keep pairs in.
* ``swizzle`` / ``st_offset``: the shared tile layout of include/tiles/smem.h (TMA SWIZZLE_{32,64,128}B).

Source of the facts: PTX ISA, "Asynchronous Warpgroup Level Matrix ... Register Fragments" (wgmma
.m64nNk16 D and A layouts: warp w of the warpgroup owns rows 16w..16w+15, each warp's part has the
shape of the mma.m16n8k16 C / A fragments repeated along N) and "Matrix Descriptor" / "Shared Memory
Matrix Layout" (swizzle = XOR of address bits [4, 4+b) with bits [7, 7+b)).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

WARPGROUP = 128  # threads that issue one wgmma
M = 64  # wgmma rows per warpgroup
K16 = 16  # wgmma k for 16-bit inputs
NS = tuple(range(8, 257, 8))  # legal wgmma N


@dataclass(frozen=True)
class Fragment:
    """``table[thread][elem] = (row, col)`` of one wgmma operand of shape rows x cols."""

    name: str
    rows: int
    cols: int
    elems: int  # per thread: fp32 registers for D, 16-bit values for A
    table: Tuple[Tuple[Tuple[int, int], ...], ...]

    def coord(self, thread: int, elem: int) -> Tuple[int, int]:
        return self.table[thread][elem]

    def inverse(self) -> Dict[Tuple[int, int], Tuple[int, int]]:
        """(row, col) -> (thread, elem)."""
        return {rc: (t, e) for t, row in enumerate(self.table) for e, rc in enumerate(row)}

    def is_bijection(self) -> bool:
        cells = [rc for row in self.table for rc in row]
        return len(cells) == len(set(cells)) == self.rows * self.cols and all(
            0 <= r < self.rows and 0 <= c < self.cols for r, c in cells)


def acc_coord(thread: int, reg: int) -> Tuple[int, int]:
    """Accumulator register `reg` of `thread` -> (row, col) inside the 64 x N tile.

    Registers come in groups of 4 per 8 columns: (r0, c), (r0, c+1), (r0+8, c), (r0+8, c+1) with
    r0 = 16*warp + lane//4 and c = 8*(reg//4) + 2*(lane%4).
    """
    warp, lane = divmod(thread, 32)
    row = 16 * warp + lane // 4 + 8 * ((reg // 2) % 2)
    col = 8 * (reg // 4) + 2 * (lane % 4) + reg % 2
    return row, col


def a_coord(thread: int, elem: int) -> Tuple[int, int]:
    """16-bit A-fragment element `elem` (0..7) of `thread` -> (row, k) inside the 64 x 16 operand.

    e = 0,1: (r0, c0+e); 2,3: (r0+8, c0+e-2); 4,5: (r0, c0+8+e-4); 6,7: (r0+8, c0+8+e-6),
    r0 = 16*warp + lane//4, c0 = 2*(lane%4). It equals the accumulator layout of the same 64 x 16
    block (register e of acc(16)), which is why an fp32 accumulator cast to bf16 is an A operand.
    """
    warp, lane = divmod(thread, 32)
    row = 16 * warp + lane // 4 + 8 * ((elem // 2) % 2)
    col = 8 * (elem // 4) + 2 * (lane % 4) + elem % 2
    return row, col


def acc(n: int) -> Fragment:
    if n not in NS:
        raise ValueError(f"wgmma N must be a multiple of 8 in [8, 256], got {n}")
    table = tuple(tuple(acc_coord(t, r) for r in range(n // 2)) for t in range(WARPGROUP))
    return Fragment(f"wgmma.m64n{n}k16 D (f32)", M, n, n // 2, table)


def a_frag() -> Fragment:
    table = tuple(tuple(a_coord(t, e) for e in range(8)) for t in range(WARPGROUP))
    return Fragment("wgmma.m64nNk16 A (16-bit, registers)", M, K16, 8, table)


def rt_coord(thread: int, slice_: int, pair: int, elem: int) -> Tuple[int, int]:
    """Register tile of rt.h: pair `pair` (two adjacent columns) of 64-row slice `slice_`."""
    row, col = acc_coord(thread, 2 * pair + elem)
    return 64 * slice_ + row, col


def row_owners(row: int) -> Tuple[int, ...]:
    """Threads holding elements of accumulator row `row` (0..63): one lane quad, whose row
    reductions finish with shuffles xor 1 and xor 2 (ops.h `row_reduce`)."""
    def r0(t: int) -> int:
        return 16 * (t // 32) + (t % 32) // 4
    return tuple(t for t in range(WARPGROUP) if row in (r0(t), r0(t) + 8))


# ----------------------------------------------------------------------------- shared memory


def swizzle(lin: int, sw: int) -> int:
    """Byte offset after the sw-byte swizzle (sw in 32, 64, 128): bits [4, 4+b) ^= bits [7, 7+b)."""
    if sw not in (32, 64, 128):
        raise ValueError("swizzle is 32, 64 or 128 bytes")
    mask = sw // 16 - 1
    return lin ^ (((lin >> 7) & mask) << 4)


def st_offset(r: int, c: int, rows: int, cols: int, sw: int = 128, elem_bytes: int = 2) -> int:
    """Byte offset of element (r, c) in a shared tile (smem.h `st::offset`): column chunks of
    sw / elem_bytes columns, each chunk rows x sw bytes, swizzled."""
    cw = sw // elem_bytes
    if cols % cw:
        raise ValueError(f"cols={cols} must be a multiple of {cw} for a {sw}-byte swizzle")
    return (c // cw) * rows * sw + swizzle(r * sw + (c % cw) * elem_bytes, sw)


__all__ = ["WARPGROUP", "M", "K16", "NS", "Fragment", "acc_coord", "a_coord", "acc", "a_frag", "rt_coord",
           "row_owners", "swizzle", "st_offset"]
