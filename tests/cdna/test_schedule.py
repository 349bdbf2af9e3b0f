"""Ping-pong / interleave schedules as data, their checker, s_waitcnt accounting and the tile order."""
from __future__ import annotations

import dataclasses

import pytest

from tiles.backends.cdna import schedule as S
from tiles.backends.cdna.gemm_probe import gemm_config


def pp(a=4, b=4, direct=False):
    return S.pingpong_gemm(S.GemmShape(a, b, direct))


@pytest.mark.parametrize("a,b,direct", [(4, 4, False), (4, 4, True), (2, 2, False), (1, 2, False), (8, 8, True)])
def test_pingpong_passes_its_checks(a, b, direct):
    s = pp(a, b, direct)
    S.check(s)
    counts = S.barrier_counts(s, 5)
    assert counts[0] == counts[1] == 1 + 1 + 5 * 8  # prologue + the one extra each + 8 clusters per tile
    assert [c.kind for c in s.body] == ["memory", "compute"] * 4
    assert s.threads == 512


def test_pingpong_layout_of_the_gemm_configs():
    for arch in ("gfx942", "gfx950"):
        c = gemm_config(arch)
        s = c.schedule()
        S.check(s)
        assert s.loads == {"A": c.a_loads, "B": c.b_loads}
    # gfx950 default: A straight into LDS, so M2 only waits (no ds_write of A)
    s = gemm_config("gfx950").schedule()
    assert [st.kind for st in s.body[4].steps] == ["lds_read", "wait_vm"]
    assert any(st.kind == "gload_lds" for st in s.body[0].steps)


def _replace_cluster(s, i, **kw):
    body = list(s.body)
    body[i] = dataclasses.replace(body[i], **kw)
    return dataclasses.replace(s, body=tuple(body))


def test_unbalanced_barriers_are_caught():
    s = pp()
    with pytest.raises(AssertionError, match="unbalanced|lead"):
        S.check(dataclasses.replace(s, trail_extra={}))
    with pytest.raises(AssertionError, match="lead"):
        S.check(dataclasses.replace(s, lead_extra={1: 0}, trail_extra={}))


def test_compute_clusters_need_setprio():
    s = pp()
    c0 = s.body[1]
    with pytest.raises(AssertionError, match="setprio"):
        S.check(_replace_cluster(s, 1, steps=c0.steps[1:2]))


def test_write_too_close_to_the_read_is_caught():
    # writing B of tile t+1 in the last cluster (C3) leaves one epoch before the next M0 reads it:
    # the lagging group has not published its half yet
    s = pp()
    m3, c3 = s.body[6], s.body[7]
    bad = _replace_cluster(_replace_cluster(s, 6, steps=()), 7, steps=c3.steps[:1] + m3.steps + c3.steps[1:])
    with pytest.raises(AssertionError, match="before group"):
        S.check_lds_hazards(bad)


def test_overwrite_while_other_group_reads_is_caught():
    # with one LDS buffer instead of two, the writes of tile t+1 (M2, M3) land while the lagging group still
    # reads tile t from the same buffer (its M2 runs one epoch after ours)
    s = pp()
    with pytest.raises(AssertionError, match="overwrites"):
        S.check_lds_hazards(dataclasses.replace(s, stages=1))
    # moving the A write one memory cluster earlier (M1) is still safe with two buffers
    m1, m2 = s.body[2], s.body[4]
    ok = _replace_cluster(_replace_cluster(s, 2, steps=m1.steps[:1] + m2.steps[1:] + m1.steps[1:]), 4, steps=m2.steps[:1])
    S.check_lds_hazards(ok)


def test_missing_vm_wait_is_caught():
    s = pp()
    m2 = s.body[4]
    no_wait = tuple(st for st in m2.steps if st.kind != "wait_vm")
    with pytest.raises(AssertionError, match="in flight"):
        S.check_vm_waits(_replace_cluster(s, 4, steps=no_wait))


def test_waitcnt_for():
    # loads complete in issue order: waiting for A0..A3 with B0..B3 issued after them leaves 4 outstanding
    inflight = ["A0", "A1", "A2", "A3", "B0", "B1", "B2", "B3"]
    assert S.waitcnt_for(inflight, ["A0", "A1", "A2", "A3"]) == 4
    assert S.waitcnt_for(inflight, ["A1"]) == 6
    assert S.waitcnt_for(inflight, ["B3"]) == 0
    assert S.waitcnt_for(inflight, ["B0", "A2"]) == 3
    assert S.waitcnt_for(inflight, ["X"]) is None  # nothing needed is in flight: no wait
    assert S.waitcnt_for(list(range(100)), [0]) == 63  # clamped to the 6-bit vmcnt
    assert S.waitcnt_for(list(range(100)), [0], limit=S.LGKMCNT_MAX) == 15


def test_pingpong_waits_are_derived_from_loads():
    for a, b in ((4, 4), (2, 2), (3, 5)):
        s = pp(a, b)
        waits = [st.n for c in s.body for st in c.steps if st.kind == "wait_vm"]
        assert waits == [b, 0]  # M2: A done with B's b loads still in flight; M3: everything


def test_waitcnt_encoding_matches_the_isa():
    # encodings llvm-objdump printed for the compiled GEMM (low 16 bits of the s_waitcnt word)
    assert S.waitcnt_imm("gfx942", vm=4, lgkm=15) == 0x0F74  # s_waitcnt vmcnt(4)
    assert S.waitcnt_imm("gfx950", vm=0, lgkm=15) == 0x0F70  # s_waitcnt vmcnt(0)
    assert S.waitcnt_imm("gfx942", vm=63, lgkm=0) == 0xC07F  # s_waitcnt lgkmcnt(0)
    assert S.waitcnt_imm("gfx942", vm=63, lgkm=3) == 0xC37F
    assert S.waitcnt_imm("gfx950", vm=17, lgkm=15) == 0x4F71  # vmcnt high bits live in [15:14]
    with pytest.raises(ValueError):
        S.waitcnt_imm("gfx942", vm=64)
    with pytest.raises(ValueError):
        S.waitcnt_imm("gfx90a")


def test_interleave_schedule():
    s = S.interleave_gemm(S.GemmShape(4, 4), n_mfma=32, n_ds_read=24)
    S.check(s)
    pat = s.body[0].pattern
    totals = {}
    for kind, n in pat:
        totals[kind] = totals.get(kind, 0) + n
    assert totals == {"mfma": 32, "ds_read": 24, "vmem_read": 8}
    assert pat[0] == ("mfma", 1)
    assert all(a[0] != b[0] for a, b in zip(pat, pat[1:]))
    assert S.barrier_counts(s, 3) == {0: 1 + 3 * 2}
    assert set(S.SCHED_MASK) >= {k for k, _ in pat}


# ---------------------------------------------------------------- chiplet-aware tile order

@pytest.mark.parametrize("tm,tn,chunk,group", [(32, 32, 64, 8), (7, 13, 4, 3), (1, 1, 64, 8), (40, 30, 16, 8), (33, 33, 64, 32)])
def test_tile_order_is_a_permutation(tm, tn, chunk, group):
    order = S.tile_order(tm, tn, 8, chunk, group)
    assert S.is_permutation(order, tm, tn)
    ids = [S.chiplet_remap(w, tm * tn, 8, chunk) for w in range(tm * tn)]
    assert sorted(ids) == list(range(tm * tn))


def test_chiplet_remap_keeps_chunks_on_one_xcd():
    n, chunk = 1024, 64
    for w in range(n):
        logical = S.chiplet_remap(w, n, 8, chunk)
        # logical ids [x*chunk, (x+1)*chunk) of each block of 512 run on XCD x = w % 8
        assert (logical % (8 * chunk)) // chunk == w % 8


def test_chiplet_order_shrinks_each_xcd_working_set():
    tm = tn = 32  # 8192^2 with 256x256 tiles
    plain = [(w // tn, w % tn) for w in range(tm * tn)]
    grouped_only = S.tile_order(tm, tn, 1, 1, 8)
    remapped = S.tile_order(tm, tn, 8, 64, 8)
    fp = [S.xcd_footprint(o) for o in (plain, grouped_only, remapped)]
    # round-robin dispatch scatters a grouped order over the XCDs (each sees one tile row); the remap
    # gives every XCD a compact block of the grouped order back
    assert fp[2] < fp[1] and fp[2] <= fp[0], fp
