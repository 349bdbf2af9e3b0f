"""The Hopper layout tables are self-consistent and agree with the device headers' formulas (CPU)."""
from __future__ import annotations

import pathlib

import pytest

from tiles.backends.hopper import layouts as L

HEADERS = pathlib.Path(L.__file__).parent / "include" / "tiles"


@pytest.mark.parametrize("n", [8, 16, 64, 128, 256])
def test_acc_is_a_bijection(n):
    f = L.acc(n)
    assert f.is_bijection()
    assert len(f.inverse()) == 64 * n


def test_a_fragment_is_a_bijection_and_equals_the_first_16_accumulator_columns():
    a, d = L.a_frag(), L.acc(16)
    assert a.is_bijection()
    assert a.table == d.table  # fp32 accumulators cast to 16-bit are an A operand as they stand


def test_each_warp_owns_16_rows_and_each_row_one_quad():
    for t in range(128):
        rows = {L.acc_coord(t, r)[0] for r in range(128)}
        w = t // 32
        assert rows <= set(range(16 * w, 16 * w + 16)) and len(rows) == 2
    for row in range(64):
        owners = L.row_owners(row)
        assert len(owners) == 4 and owners[0] % 4 == 0 and owners == tuple(range(owners[0], owners[0] + 4))


def test_rt_pairs_are_adjacent_columns():
    for t in (0, 5, 37, 127):
        for s in range(2):
            for p in range(64):
                r0, c0 = L.rt_coord(t, s, p, 0)
                r1, c1 = L.rt_coord(t, s, p, 1)
                assert r0 == r1 and c1 == c0 + 1 and c0 % 2 == 0 and 64 * s <= r0 < 64 * s + 64


def test_header_formulas_match_the_table():
    # rt.h spells the same layout in frag_row/frag_col; keep the two in step
    text = (HEADERS / "rt.h").read_text()
    assert "64 * s + 16 * (t >> 5) + ((t & 31) >> 2) + 8 * (p & 1)" in text
    assert "8 * (p >> 1) + 2 * (t & 3)" in text
    for t in range(128):
        for s in range(2):
            for p in range(16):
                row = 64 * s + 16 * (t >> 5) + ((t & 31) >> 2) + 8 * (p & 1)
                col = 8 * (p >> 1) + 2 * (t & 3)
                assert L.rt_coord(t, s, p, 0) == (row, col)


@pytest.mark.parametrize("sw", [32, 64, 128])
def test_swizzle_is_a_permutation_of_16_byte_pieces_per_period(sw):
    period = 8 * 128  # the pattern repeats every 1024 bytes
    outs = [L.swizzle(x, sw) for x in range(0, 4 * period, 16)]
    assert sorted(outs) == list(range(0, 4 * period, 16))
    assert all(L.swizzle(x, sw) // period == x // period for x in range(0, 4 * period, 16))


def test_st_offset_is_a_bijection_and_chunks_are_tma_boxes():
    rows, cols = 64, 256
    offs = {L.st_offset(r, c, rows, cols) for r in range(rows) for c in range(cols)}
    assert offs == set(range(0, rows * cols * 2, 2))
    # chunk j (columns 64j..64j+63) occupies bytes [j*rows*128, (j+1)*rows*128): one 64 x rows box
    for c in (0, 63, 64, 200):
        assert L.st_offset(5, c, rows, cols) // (rows * 128) == c // 64
    # row 0 is never permuted; row 1's first 16 bytes move to piece 1 under 128-byte swizzle
    assert L.st_offset(0, 8, rows, cols) == 16 and L.st_offset(1, 0, rows, cols) == 128 + 16
