"""MFMA fragment layouts, LDS swizzles and the bank model.

The layouts in tiles/backends/cdna/layouts.py are checked against definitions written here separately,
in the form the sources state them:
* AMD Matrix Instruction Calculator (ROCm/amd_matrix_instruction_calculator, gfx9 class), which is the
  CDNA3 ISA guide's section 7 in code: an input element (i, k) of an MxNxK MFMA with kl = K / (64 / M)
  values per lane sits in lane i + M * (k // kl), item k % kl; a 32-bit output element (i, j) sits in lane
  j + N * ((i // 4) % (64 / N)) and register 4 * (i // (4 * 64 / N)) + i % 4.
* So for v_mfma_f32_32x32x8_bf16 (gfx942): C/D register r of lane l holds row 8*(r//4) + 4*(l//32) + r%4,
  column l % 32; for 16x16x16: row 4*(l//16) + r, column l % 16.
* gfx950's v_mfma_f32_32x32x16_bf16 / 16x16x32_bf16 hold 8 consecutive k per lane (CDNA4 guide; HipKittens
  rt_32x16 / rt_16x32 shapes with stride 8): lane i + 32*(k//8) / i + 16*(k//8).
"""
from __future__ import annotations

import itertools

import pytest

from tiles.backends.cdna import layouts as L


# ---------------------------------------------------------------- the ISA definitions, written out

def isa_a(m, k_total, kl):  # (i, k) -> (lane, item)
    return {(i, k): (i + m * (k // kl), k % kl) for i in range(m) for k in range(k_total)}


def isa_d(m, n):  # (i, j) -> (lane, reg)
    return {(i, j): (j + n * ((i // 4) % (64 // n)), 4 * (i // (4 * 64 // n)) + i % 4) for i in range(m) for j in range(n)}


ISA = {
    # (arch, base): (M, K, values per lane)
    ("gfx942", 32): (32, 8, 4),
    ("gfx942", 16): (16, 16, 4),
    ("gfx950", 32): (32, 16, 8),
    ("gfx950", 16): (16, 32, 8),
}


@pytest.mark.parametrize("key", list(ISA))
def test_fragments_match_isa(key):
    m, k, kl = ISA[key]
    ins = L.MFMA[key]
    assert (ins.m, ins.n, ins.k) == (m, m, k)
    assert ins.a.elems == ins.b.elems == kl
    a_inv = ins.a.inverse()
    for (i, kk), where in isa_a(m, k, kl).items():
        assert a_inv[(i, kk)] == where, f"A{(i, kk)}"
    b_inv = ins.b.inverse()  # B is K x N: element (k, j) follows the same rule with j in place of i
    for (j, kk), where in isa_a(m, k, kl).items():
        assert b_inv[(kk, j)] == where, f"B{(kk, j)}"
    d_inv = ins.c.inverse()
    for ij, where in isa_d(m, m).items():
        assert d_inv[ij] == where, f"D{ij}"


def test_brief_formula_32x32_output():
    # "the C/D register r of lane l holds row 8*(r//4) + 4*(l//32) + r%4" (32x32x8, both archs' 32x32 bases)
    for arch in L.ARCHS:
        c = L.MFMA[(arch, 32)].c
        for lane, r in itertools.product(range(64), range(16)):
            assert c.coord(lane, r) == (8 * (r // 4) + 4 * (lane // 32) + r % 4, lane % 32)


@pytest.mark.parametrize("key", list(L.MFMA))
def test_fragments_are_bijections(key):
    ins = L.MFMA[key]
    for f in (ins.a, ins.b, ins.c):
        assert f.is_bijection(), (key, f.operand)
    assert ins.c.elems == ins.m * ins.n // 64


def test_mnemonics_and_builtins():
    assert L.MFMA[("gfx942", 32)].mnemonic("bf16") == "v_mfma_f32_32x32x8_bf16"
    assert L.MFMA[("gfx942", 16)].mnemonic("bf16") == "v_mfma_f32_16x16x16_bf16"
    assert L.MFMA[("gfx950", 32)].mnemonic("bf16") == "v_mfma_f32_32x32x16_bf16"
    assert L.MFMA[("gfx950", 16)].mnemonic("bf16") == "v_mfma_f32_16x16x32_bf16"
    assert L.MFMA[("gfx942", 32)].builtin.format(t="bf16") == "__builtin_amdgcn_mfma_f32_32x32x8bf16_1k"
    assert L.MFMA[("gfx950", 32)].builtin.format(t="bf16") == "__builtin_amdgcn_mfma_f32_32x32x16_bf16"


@pytest.mark.parametrize("arch,mf", list(L.MFMA))
def test_logical_chunk_is_a_valid_k_permutation(arch, mf):
    """The arch-neutral operand layout of rt.h (8 consecutive k per lane) feeds the hardware MFMAs so that
    every product A[i][k] B[k][j] of the slab is taken exactly once."""
    assert L.logical_is_valid(arch, mf)
    assert len(L.logical_split(arch, mf)) == (2 if arch == "gfx942" else 1)


def test_logical_check_catches_wrong_layouts(monkeypatch):
    # any relabelling of k shared by A and B is fine (it is a permutation of the sum) ...
    monkeypatch.setattr(L.Logical, "operand", lambda self, lane, e: (lane % self.mf, (8 * (lane // self.mf) + 3 * e) % self.kslab))
    assert L.logical_is_valid("gfx942", 32)
    # ... but not one that drops k values (both lane halves claiming k 0..7) ...
    monkeypatch.setattr(L.Logical, "operand", lambda self, lane, e: (lane % self.mf, e))
    assert not L.logical_is_valid("gfx942", 32)
    # ... nor one whose lanes hold other rows than the hardware reads
    monkeypatch.setattr(L.Logical, "operand", lambda self, lane, e: ((lane + 1) % self.mf, 8 * (lane // self.mf) + e))
    assert not L.logical_is_valid("gfx950", 16)


# ---------------------------------------------------------------- bank model

def test_bank_models_partition_the_wave():
    for key, m in L.BANK_MODELS.items():
        lanes = sorted(l for p in m.phases for l in p)
        assert lanes == list(range(64)), key
        assert len({len(p) for p in m.phases}) == 1, key
        assert m.source


def test_hipkittens_b128_phases():
    m = L.BANK_MODELS[("gfx950", "ds_read_b128")]
    assert m.banks == 64 and len(m.phases) == 4
    assert set(m.phases[0]) == set(range(0, 4)) | set(range(12, 16)) | set(range(20, 28))
    assert set(m.phases[1]) == set(range(4, 12)) | set(range(16, 20)) | set(range(28, 32))
    assert L.BANK_MODELS[("gfx950", "ds_read_b64")].phases == (tuple(range(32)), tuple(range(32, 64)))
    assert L.BANK_MODELS[("gfx942", "ds_read_b128")].phases[1] == tuple(range(8, 16))


def test_bank_conflict_counter():
    rd = L.BANK_MODELS[("gfx942", "ds_read_b128")]
    assert L.bank_conflicts([16 * l for l in range(64)], rd) == 0  # contiguous 16-byte reads
    assert L.bank_conflicts([0] * 64, rd) == 0  # broadcast of one address
    # 8 lanes of a phase reading the same bank group 128 bytes apart: 8 distinct dwords per bank -> 7 extra
    assert L.bank_conflicts([128 * (l % 8) for l in range(64)], rd) == 8 * 7
    # gfx950 b128 phases are not contiguous lanes: lanes 0 and 4 (different phases) may share banks freely
    hk = L.BANK_MODELS[("gfx950", "ds_read_b128")]
    addrs = [None] * 64
    addrs[0], addrs[4] = 0, 256
    assert L.bank_conflicts(addrs, hk) == 0
    addrs[4], addrs[12] = None, 256  # lanes 0 and 12 share phase 0: one conflict
    assert L.bank_conflicts(addrs, hk) == 1
    assert L.bank_conflicts([None] * 64, hk) == 0


@pytest.mark.parametrize("arch", L.ARCHS)
@pytest.mark.parametrize("bk,kr", [(32, 2), (64, 4)])
def test_chosen_swizzle_is_conflict_free(arch, bk, kr):
    sw = L.choose_swizzle(arch, bk, kr)
    assert L.swizzle_is_permutation(sw, 256, bk * 2)
    for mf in (32, 16):
        assert L.gemm_lds_conflicts(arch, mf, bk, sw, kr) == {"read_b128": 0, "write_b128": 0, f"write_b{16 * kr}_T": 0}


@pytest.mark.parametrize("arch", L.ARCHS)
def test_unswizzled_operand_reads_conflict(arch):
    # the model sees what the swizzle is for: row-major 128-byte rows make the MFMA reads collide
    assert L.gemm_lds_conflicts(arch, 32, 64, L.IDENTITY, 4)["read_b128"] > 0


def test_swizzle_choice_per_arch():
    # the two bank models want different swizzles: gfx942 (8-lane phases) is happy with chunk ^ line,
    # gfx950 (HK's interleaved 16-lane phases) needs chunk ^ line ^ line >> 1
    assert L.choose_swizzle("gfx942", 64, 4) == L.Swizzle(0, None, 7)
    assert L.choose_swizzle("gfx950", 64, 4) == L.Swizzle(0, 1, 7)
    assert L.gemm_lds_conflicts("gfx950", 32, 64, L.Swizzle(0, None, 7), 4)["read_b128"] > 0


# ---------------------------------------------------------------- every kernel, both targets

def _kernel_configs():
    from tiles.backends.cdna import gemm_probe as G
    from tiles.backends.cdna import lower_attention as A
    for arch in L.ARCHS:
        for mf in (32, 16):
            yield f"gemm-{arch}-mf{mf}", G.gemm_config(arch, mf=mf)
            yield f"interleave-{arch}-mf{mf}", G.interleave_config(arch, mf=mf)
        for D in (64, 128):
            yield f"attn-fwd-{arch}-D{D}", A.AttnConfig(arch, "bf16", "bf16", D, 128, A.default_tiles(arch, D)["BN"], True)
            yield f"attn-bwd-dq-{arch}-D{D}", A.BwdDqConfig(arch, "bf16", "bf16", D, 128, A.default_tiles_bwd(arch, D)["BN"], True)
            t = A.default_tiles_dkdv(arch, D)
            yield f"attn-bwd-dkdv-{arch}-D{D}", A.BwdDkdvConfig(arch, "bf16", "bf16", D, t["BM"], t["BN"], True)
        yield f"attn-fwd-{arch}-D64-BM256", A.AttnConfig(arch, "bf16", "bf16", 64, 256, 128, True)


@pytest.mark.parametrize("name,cfg", list(_kernel_configs()), ids=lambda x: x if isinstance(x, str) else "")
def test_every_kernel_lds_access_is_conflict_free(name, cfg):
    """Zero extra cycles under the bank model for EVERY wave-wide LDS instruction each kernel issues (all
    row blocks, k-slabs, passes, waves and write numbers of each tile), on gfx942 and gfx950; each tile's
    swizzle, chosen per instruction width and tile shape, permutes the tile."""
    c = cfg.lds_conflicts() if hasattr(cfg, "lds_conflicts") else cfg.conflicts()
    assert c and all(v == 0 for v in c.values()), (name, c)
    assert any(k.endswith("read_b128") for k in c) and any("write" in k for k in c), c


def test_line_pair_swizzle_is_what_gfx950_needs():
    """gfx950's ds_read_b128 serves 16 lanes x 16 bytes = all 64 banks per phase; a 16x16 operand read of a
    256-byte-row tile puts 16 lanes on the even lines of a line pair, so any line-local XOR leaves them on
    32 of the 64 banks (the 4 extra cycles seen before), and only a line-pair (256-byte block) XOR fixes it.
    gfx942 (32 banks, 8-lane phases) needs none."""
    from tiles.backends.cdna import lower_attention as A
    for name, acc in (("fwd K", A.perm_tile_accesses(16, 64, 128, "direct")),
                      ("dkdv Q", A.perm_tile_accesses(16, 32, 128, "rows", 2, A.STAGE_THREADS)),
                      ("fwd V^T D=64", A.t_tile_accesses(16, 64, 128, 2))):
        line_local = [sw for sw in L.candidate_swizzles() if sw.block == 128]
        assert min(sum(L.access_conflicts("gfx950", acc, sw).values()) for sw in line_local) == 4, name
        chosen = L.best_swizzle("gfx950", acc)
        assert chosen.block == 256 and sum(L.access_conflicts("gfx950", acc, chosen).values()) == 0, name
        assert L.best_swizzle("gfx942", acc).block == 128, name


def test_swizzle_blocks():
    sw = L.Swizzle(0, 1, 15, 256)
    assert sw.cpp_args() == "0, 1, 15, 256" and L.Swizzle(0, 1, 7).cpp_args() == "0, 1, 7"
    assert L.swizzle_is_permutation(sw, 64, 256) and L.swizzle_is_permutation(sw, 64, 128)
    assert not L.swizzle_is_permutation(sw, 1, 128)  # a tile of half a block cannot hold the XOR
    # chunks move between the two lines of a pair, never out of it
    for r in range(8):
        for c in range(0, 128, 8):
            assert sw.offset(r, c, 256) // 256 == r
