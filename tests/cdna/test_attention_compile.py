"""attention_fwd lowered to CDNA (lower_attention.py): compiled for gfx942 (clang-22, clang-19) and gfx950
(clang-22); the ISA has what the schedule says (the arch's MFMA, buffer loads, LDS traffic, s_setprio,
s_barrier, the derived vmcnt waits), resources fit (no scratch, no spills, registers, LDS), the schedule
checker accepts the schedule and rejects broken ones, hiprtc-style compile, `tiles show` / `--emit`."""
from __future__ import annotations

import functools
import os
import re
import subprocess
import sys

import pytest
import torch

from tiles import backends
from tiles.backends.cdna import compile as cc
from tiles.backends.cdna import layouts as L
from tiles.backends.cdna import schedule as S
from tiles.backends.cdna.gemm_probe import LDS_LIMIT
from tiles.backends.cdna.lower_attention import AttnConfig, attention_schedule, default_tiles, key_perm
from tiles.core.lowering import LoweringError
from tiles.kernels import SUITE

from .conftest import TOOLCHAINS, need_clang

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def t(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


def lower(arch="gfx942", D=128, causal=True, dtype=torch.bfloat16, out=None, H=8, Hkv=2, ragged=False, paged=False,
          **tiles):
    q = t(2, 1000, H, D, dtype=dtype)
    kv = t(2, 1500, Hkv, D, dtype=dtype) if not paged else t(40, 256, Hkv, D, dtype=dtype)  # paged: a pool of pages
    lse = t(2, H, 1000, dtype=torch.float32)
    cfg = {**backends.get("cdna").config("attention_fwd", arch=arch, D=D), **tiles}
    lens = (t(2, dtype=torch.int32),) if ragged or paged else ()  # KLen: each sequence's key count
    lens += (t(2, 8, dtype=torch.int32),) if paged else ()  # Pages: each sequence's pages of the pool
    return backends.get("cdna").lower(SUITE["attention_fwd"], q, kv, kv, t(2, 1000, H, D, dtype=out or dtype), lse, D**-0.5,
                                      *lens, causal=causal, D=D, arch=arch, **cfg)


@functools.lru_cache(maxsize=None)
def compiled(arch, clang, D, causal, hiprtc=False, asm=False):
    low = lower(arch, D, causal)
    return low, cc.compile_hip(low.source, arch, clang, hiprtc=hiprtc, asm=asm)


def loop_of(disasm: str) -> str:
    """The K/V loop: the outermost backward-branching loop (clang-19 closes it with an s_branch)."""
    return cc.loop_body(disasm, outermost=True)


MFMA = {("gfx942", 16): "v_mfma_f32_16x16x16_bf16", ("gfx950", 16): "v_mfma_f32_16x16x32_bf16"}


@pytest.mark.parametrize("arch,clang", TOOLCHAINS)
@pytest.mark.parametrize("D,causal", [(128, True), (64, False), (128, False), (64, True)])
def test_attention_isa_and_resources(arch, clang, D, causal):
    need_clang(clang)
    low, r = compiled(arch, clang, D, causal)
    cfg = low.notes["config"]
    mn = MFMA[(arch, cfg.mf)]
    assert {m for m in r.counts if m.startswith("v_mfma")} == {mn}, r.summary()
    loop = cc.instruction_counts(loop_of(r.disasm))
    per = cfg.mfma_per_tile
    assert loop.get(mn) == per["S"] + per["O"], (loop, per)
    # memory: K via buffer_load (gfx950: straight into LDS), V via buffer_load + transposed ds_write_b32
    if cfg.direct_k:
        assert loop.get("buffer_load_dwordx4_lds") == cfg.k_loads and loop.get("buffer_load_dwordx4") == cfg.v_loads
    else:
        assert loop.get("buffer_load_dwordx4") == cfg.k_loads + cfg.v_loads
        assert loop.get("ds_write_b128") == cfg.k_loads
    assert loop.get("ds_write_b32") == 8 * (cfg.v_loads // cfg.kr)
    reads = (cfg.BN // cfg.mf) * (cfg.D // L.Logical(cfg.mf).kslab) + (cfg.D // cfg.mf) * (cfg.BN // L.Logical(cfg.mf).kslab)
    assert loop.get("ds_read_b128") == reads
    # ping-pong: 4 barriers and 2 priority raises (+2 drops) per K/V tile; 3 more around the loop
    assert loop.get("s_barrier") == 4 and loop.get("s_setprio") == 4
    assert r.count("s_barrier") == 7
    # softmax row reductions: in-lane + xor-16 (ds_swizzle) + xor-32 (ds_bpermute), twice (max, sum)
    assert loop.get("ds_bpermute_b32") == 2 and loop.get("ds_swizzle_b32") == 2
    assert sum(n for m, n in loop.items() if m.startswith("v_exp_f32")) >= cfg.BN * cfg.mf // 64
    res = r.resources
    assert res["scratch"] == 0 and res["vgpr_spill"] == 0 and res["sgpr_spill"] == 0, r.summary()
    assert r.vgpr_total <= 256 and res["occupancy"] >= 2, r.summary()  # 8 waves: 2 per SIMD
    assert res["lds"] == cfg.lds_bytes <= LDS_LIMIT[arch]
    assert r.notes["private_segment_fixed_size"] == 0 and r.notes["group_segment_fixed_size"] == cfg.lds_bytes


@pytest.mark.parametrize("arch,clang", [("gfx942", 22), ("gfx950", 22)])
@pytest.mark.parametrize("D,causal", [(128, True), (64, False)])
@pytest.mark.parametrize("cache", ["ragged", "paged"])
def test_kv_cache_forward_keeps_the_plain_kernels_resources(arch, clang, D, causal, cache):
    """Over a KV cache: ragged, each sequence's key count (KLen[b]) declared once after the program ids;
    paged, gK / gV of the first block before the prologue and of the next block at the top of each
    iteration (its page read from the table). Either keeps the plain kernel's resources: no spill, the same
    LDS, at most 8 more VGPRs, the same MFMAs."""
    need_clang(clang)
    low = lower(arch, D, causal, ragged=cache == "ragged", paged=cache == "paged")
    if cache == "ragged":
        assert low.source.count("KLen[pid2 * KLen_stride0]") == 1
        assert "const int seq_k = imax(imin(KLen[pid2 * KLen_stride0], K_shape1), 0);" in low.source
    else:
        assert low.source.count("const gview<2> gK = ") == 2 and "const int page = imax(imin(Pages[" in low.source
    r = cc.compile_hip(low.source, arch, clang)
    _, plain = compiled(arch, clang, D, causal)
    res = r.resources
    assert res["scratch"] == 0 and res["vgpr_spill"] == 0 and res["sgpr_spill"] == 0, r.summary()
    assert res["lds"] == plain.resources["lds"] and r.vgpr_total <= plain.vgpr_total + 8, (r.summary(), plain.summary())
    assert {m: n for m, n in r.counts.items() if m.startswith("v_mfma")} == {
        m: n for m, n in plain.counts.items() if m.startswith("v_mfma")}


@pytest.mark.parametrize("arch,clang", TOOLCHAINS)
def test_attention_waits_match_the_schedule(arch, clang):
    need_clang(clang)
    low, r = compiled(arch, clang, 128, True)
    loop = loop_of(r.disasm)
    vm = {int(x) for x in re.findall(r"s_waitcnt vmcnt\((\d+)\)", loop)}
    want = {st.n for c in low.notes["schedule_obj"].body for st in c.steps if st.kind == "wait_vm"}
    assert want <= vm, (want, vm)
    assert "lgkmcnt(0)" in loop


@pytest.mark.parametrize("arch,clang", TOOLCHAINS)
def test_attention_sched_barriers_in_assembly(arch, clang):
    need_clang(clang)
    _, r = compiled(arch, clang, 64, True, asm=True)
    assert r.asm.count("sched_barrier mask(0x00000000)") >= 2 * 4


@pytest.mark.parametrize("arch,clang", TOOLCHAINS)
def test_attention_hiprtc_style_compile(arch, clang):
    need_clang(clang)
    hdr, why = cc.hiprtc_header()
    if hdr is None:
        pytest.skip(f"hiprtc_runtime.h unavailable: {why}")
    low, r = compiled(arch, clang, 128, True, hiprtc=True)
    assert r.count("v_mfma") > 0 and r.resources["scratch"] == 0


# ---------------------------------------------------------------- schedule, layouts, grid: data checks


@pytest.mark.parametrize("direct", [False, True])
def test_attention_schedule_passes_the_checker(direct):
    s = attention_schedule(2, 2, direct)
    S.check(s)
    assert [c.kind for c in s.body] == ["memory", "compute", "memory", "compute"]
    waits = [st.n for c in s.body for st in c.steps if st.kind == "wait_vm"]
    assert waits == [2, 0]  # K's two loads retire while V's two stay in flight: waitcnt_for(K0 K1 V0 V1, K) = 2
    assert S.barrier_counts(s, 5) == {0: 2 + 20, 1: 2 + 20}  # 7 s_barrier instructions, 4 in the loop


def test_broken_attention_schedules_are_rejected():
    s = attention_schedule(2, 2, False)
    import dataclasses

    # one LDS buffer instead of two: group 0 writes V(t+1) in M1 while group 1 still reads V(t) there
    with pytest.raises(AssertionError, match="overwrites V"):
        S.check(dataclasses.replace(s, stages=1))
    # the V^T read moved into the K/V fetch cluster of the *next* tile's data: read before it is published
    M0, C0, M1, C1 = s.body
    early = (S.Cluster("M0", "memory", M0.steps + (S.Step("lds_read", "V", (0,)),)), C0,
             S.Cluster("M1", "memory", tuple(x for x in M1.steps if x.kind != "lds_read")), C1)
    S.check(dataclasses.replace(s, body=early))  # reading V(t) earlier is still safe (published a cluster before)
    # a wait that lets K's loads stay in flight while K is written
    bad = tuple(S.Cluster(c.name, c.kind, tuple(S.Step("wait_vm", n=3) if x.kind == "wait_vm" and x.n == 2 else x for x in c.steps))
                for c in s.body)
    with pytest.raises(AssertionError, match="in flight"):
        S.check(dataclasses.replace(s, body=bad))
    # no rebalancing barrier
    with pytest.raises(AssertionError, match="unbalanced"):
        S.check(dataclasses.replace(s, trail_extra={}))


@pytest.mark.parametrize("mf", [16, 32])
def test_key_perm_makes_the_accumulator_the_next_operand(mf):
    """S^T acc element (row R) holds key key_perm(R); after cast() the B operand's k of that value must equal
    that key: lane l, slab s, element e has k = s*kslab + 8*(l//mf) + e (layouts.Logical)."""
    lg = L.Logical(mf)
    acc = L.MFMA[("gfx950", mf)].c
    BN = 64
    for lane in range(64):
        for sl in range(BN // lg.kslab):
            for e in range(8):
                if mf == 32:
                    i, r = sl // 2, 8 * (sl % 2) + e
                else:
                    i, r = 2 * sl + e // 4, e % 4
                row, col = acc.coord(lane, r)
                assert col == lane % mf
                assert key_perm(mf, i * mf + row) == sl * lg.kslab + lg.operand(lane, e)[1]
    assert sorted(key_perm(mf, r) for r in range(BN)) == list(range(BN))


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
@pytest.mark.parametrize("D", [64, 128])
def test_attention_swizzles_from_the_bank_model(arch, D):
    cfg = AttnConfig(arch, "bf16", "bf16", D, 128, default_tiles(arch, D)["BN"], True)
    c = cfg.conflicts()
    assert all(L.swizzle_is_permutation(sw, rows, rb) for sw, rows, rb in
               ((cfg.swizzle_k, cfg.BN, 2 * D), (cfg.swizzle_v, D, 2 * cfg.BN)))
    # every LDS access conflict-free on both archs (gfx950: line-pair swizzles where a 16x16 operand read
    # of 256-byte rows needs the other line's banks; its K tile is filled by direct loads, no write family)
    assert sum(c.values()) == 0, c
    assert ("K_write_b128" in c) == (arch == "gfx942")


def test_gqa_query_heads_of_one_kv_head_share_an_xcd():
    """The template's flattened grid + chiplet_remap (same math as grid.h / schedule.chiplet_remap)."""
    nqb, H, Hkv, B = 4, 32, 4, 2
    G = H // Hkv
    total = nqb * H * B
    xcds = {}
    for hw in range(total):
        wg = S.chiplet_remap(hw, total, 8, nqb * G)
        h, b = (wg // nqb) % H, wg // (nqb * H)
        xcds.setdefault((b, h // G), set()).add(hw % 8)
    assert len(xcds) == B * Hkv and all(len(x) == 1 for x in xcds.values())
    assert sorted(S.chiplet_remap(w, total, 8, nqb * G) for w in range(total)) == list(range(total))


# ---------------------------------------------------------------- backend, CLI, errors


def test_backend_supports_and_configures_attention():
    be = backends.get("cdna")
    assert be.supports("attention_fwd") and be.supports("gemm")
    assert be.config("attention_fwd", arch="gfx942", D=128) == {"BM": 128, "BN": 64}
    assert be.config("attention_fwd", arch="gfx950", D=64) == {"BM": 128, "BN": 128}
    assert be.supports("attention_bwd_dkdv") and be.supports("attention_bwd_dq")
    assert be.config("attention_bwd_dkdv", arch="gfx942", D=128) == {"BM": 32, "BN": 128}
    assert be.config("attention_bwd_dkdv", arch="gfx950", D=64) == {"BM": 64, "BN": 128}
    low = lower("gfx950", 64, False)
    assert low.block == (512, 1, 1) and low.notes["lds_bytes"] <= LDS_LIMIT["gfx950"]
    assert len(low.notes["launch_grid"]) == 3 and "kernel attention_fwd(" in low.source
    assert lower().source == lower().source  # deterministic


@pytest.mark.parametrize("kernel", ["attention_fwd", "attention_bwd_dkdv"])
def test_attention_launch_without_rocm_raises_backend_unavailable(kernel):
    from tiles.core.backend import BackendUnavailable

    q = torch.zeros(1, 64, 2, 64, dtype=torch.bfloat16)
    lse = torch.zeros(1, 2, 64)
    args = (q, q, q, q, lse, 0.125) if kernel == "attention_fwd" else (q, q, q, q, lse, lse, q, q, 0.125)
    with pytest.raises(BackendUnavailable, match="cdna"):
        backends.get("cdna").launch(SUITE[kernel], *args, causal=True, D=64)


def test_attention_bwd_dkdv_launch_checks_its_arguments():
    from tiles.backends.cdna.lower_attention import check_attention_bwd_dkdv_args

    q = torch.zeros(1, 64, 4, 64, dtype=torch.bfloat16)
    kv = torch.zeros(1, 96, 2, 64, dtype=torch.bfloat16)
    lse = torch.zeros(1, 4, 64)
    check_attention_bwd_dkdv_args(q, kv, kv, q, lse, lse, kv, kv, D=64)
    with pytest.raises(ValueError, match="head dim"):
        check_attention_bwd_dkdv_args(q, kv, kv, q, lse, lse, kv, kv, D=128)
    with pytest.raises(ValueError, match="dk, dv"):
        check_attention_bwd_dkdv_args(q, kv, kv, q, lse, lse, kv, q, D=64)
    with pytest.raises(ValueError, match="do"):
        check_attention_bwd_dkdv_args(q, kv, kv, q[..., :32], lse, lse, kv, kv, D=64)
    with pytest.raises(ValueError, match="multiple"):
        check_attention_bwd_dkdv_args(q[:, :, :3], kv, kv, q[:, :, :3], lse, lse, kv, kv, D=64)


def test_attention_lowering_errors_are_clear():
    with pytest.raises(LoweringError, match="LDS"):
        lower("gfx942", 128, True, BN=128)  # 128 KiB of K/V double buffer on a 64 KiB CU
    with pytest.raises(LoweringError, match="registers"):
        lower("gfx942", 128, True, BM=256, BN=64)  # 32 query rows per wave at D = 128 spills
    with pytest.raises(LoweringError, match="BM must be"):
        lower("gfx942", 64, True, BM=64)
    with pytest.raises(LoweringError, match="attention shape"):
        from tiles.backends.cdna.lower_attention import CDNAAttentionLowering

        q, lse = t(1, 128, 4, 64), t(1, 4, 128, dtype=torch.float32)
        CDNAAttentionLowering(SUITE["attention_bwd_dq"].trace(q, q, q, q, lse, lse, q, 0.125, causal=True, D=64), "gfx942").lower()


def test_show_prints_readable_code():
    r = subprocess.run([sys.executable, "-m", "tiles", "show", "attention_fwd", "--backend", "cdna", "--arch", "gfx942"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    src = r.stdout
    for want in ("// ======== M0: memory cluster", "// ======== C1: compute cluster", "// row_max(m_new, s, m)",
                 "row_max(m_new, s, &m);", "rt_t<MF, BN, MF, true> s;", "arch::setprio<1>();", "arch::wait_vmcnt<2>();",
                 "if (g == 1) arch::barrier();", "chiplet_remap("):
        assert want in src, want


def test_show_refuses_a_kernel_it_does_not_lower():
    """The fused backward is Hopper-only: one line saying so, exit status 2, no traceback."""
    r = subprocess.run([sys.executable, "-m", "tiles", "show", "attention_bwd_fused", "--backend", "cdna"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "cdna: kernel 'attention_bwd_fused' has no CDNA lowering" in r.stderr and "backend='interp'" in r.stderr


@pytest.mark.parametrize("kernel", ["attention_fwd", "attention_bwd_dkdv"])
@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_emit_writes_a_unit_clang_compiles(tmp_path, arch, kernel):
    need_clang(22)
    r = subprocess.run([sys.executable, "-m", "tiles", "show", kernel, "--backend", "cdna", "--arch", arch,
                        "--emit", str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    src = [p for p in r.stdout.split() if p.endswith(".hip")][0]
    c = subprocess.run([cc.toolchain(22).clang, "-x", "hip", f"--offload-arch={arch}", "--cuda-device-only",
                        "--no-gpu-bundle-output", "-nogpulib", "-nogpuinc", "-O3", "-std=c++17", "-I", str(tmp_path), "-c", src,
                        "-o", str(tmp_path / "a.co")], capture_output=True, text=True)
    assert c.returncode == 0, c.stderr[-3000:]


@pytest.mark.parametrize("arch,clang", [("gfx942", 22), ("gfx950", 22)])
@pytest.mark.parametrize("D,causal", [(128, True), (64, False), (64, True)])
def test_packed_sequences_forward_keeps_the_plain_kernels_resources(arch, clang, D, causal):
    """Packed sequences (a table of query blocks, api._blocks): each program reads its block's row of the
    table once, after the program ids, and its O and L views end at the sequence's last row. No memory spill, the plain
    kernel's LDS and MFMAs, at most 8 more VGPRs. The D = 64 causal kernel's SGPRs are at the limit
    without them (104-106), and the sequence's offsets take a few more: clang spills up to three SGPRs
    into VGPR lanes there (v_writelane, no scratch), which the bound below allows only for that kernel."""
    need_clang(clang)
    q, kv = t(1, 1000, 8, D), t(1, 1500, 2, D)
    cfg = backends.get("cdna").config("attention_fwd", arch=arch, D=D)
    low = backends.get("cdna").lower(SUITE["attention_fwd"], q, kv, kv, t(1, 1000, 8, D), t(3, 8, 512, dtype=torch.float32),
                                     D ** -0.5, None, None, t(12, 6, dtype=torch.int32),
                                     causal=causal, D=D, arch=arch, **cfg)
    assert all(low.source.count(f"Blocks[pid0 * Blocks_stride0 + {c} * Blocks_stride1]") == 1 for c in range(6))
    assert "imin(q0 + seq_q, O_shape1), O_shape3, O_stride1);" in low.source
    assert "imin(seq_q, L_shape2), L_shape2);" in low.source
    r = cc.compile_hip(low.source, arch, clang)
    _, plain = compiled(arch, clang, D, causal)
    res = r.resources
    assert res["scratch"] == 0 and res["vgpr_spill"] == 0, r.summary()
    assert res["sgpr_spill"] <= (3 if (D, causal) == (64, True) else 0), r.summary()
    assert res["lds"] == plain.resources["lds"] and r.vgpr_total <= plain.vgpr_total + 8, (r.summary(), plain.summary())
    assert {m: n for m, n in r.counts.items() if m.startswith("v_mfma")} == {
        m: n for m, n in plain.counts.items() if m.startswith("v_mfma")}


@pytest.mark.parametrize("arch,clang", [("gfx942", 22), ("gfx950", 22)])
@pytest.mark.parametrize("D,causal", [(128, True), (64, False), (64, True)])
def test_packed_sequences_over_a_paged_cache(arch, clang, D, causal):
    """Packed queries over a paged cache (tiles.attention_varlen with block_table: the table of query blocks
    and Pages): the block's sequence, rows and key count read once (not its first key: the pages place the
    keys), each key block's page read from the page table, no scratch, the
    plain kernel's LDS and MFMAs. The D = 64 causal kernel, at the SGPR limit already, moves some SGPRs into
    VGPR lanes (v_writelane; no memory), bounded here."""
    need_clang(clang)
    q, pool = t(1, 1000, 8, D), t(40, 256, 2, D)
    cfg = backends.get("cdna").config("attention_fwd", arch=arch, D=D)
    low = backends.get("cdna").lower(SUITE["attention_fwd"], q, pool, pool, t(1, 1000, 8, D), t(3, 8, 512, dtype=torch.float32),
                                     D ** -0.5, None, t(3, 8, dtype=torch.int32), t(12, 6, dtype=torch.int32),
                                     causal=causal, D=D, arch=arch, **cfg)
    assert all(low.source.count(f"Blocks[pid0 * Blocks_stride0 + {c} * Blocks_stride1]") == (c != 3) for c in range(6))
    assert "Pages[" in low.source and "imin(q0 + seq_q, O_shape1), O_shape3, O_stride1);" in low.source
    r = cc.compile_hip(low.source, arch, clang)
    _, plain = compiled(arch, clang, D, causal)
    res = r.resources
    assert res["scratch"] == 0 and res["vgpr_spill"] == 0, r.summary()
    assert res["sgpr_spill"] <= (24 if (D, causal) == (64, True) else 0), r.summary()
    assert res["lds"] == plain.resources["lds"] and r.vgpr_total <= plain.vgpr_total + 8, (r.summary(), plain.summary())
    assert {m: n for m, n in r.counts.items() if m.startswith("v_mfma")} == {
        m: n for m, n in plain.counts.items() if m.startswith("v_mfma")}
