"""The generated kernels and device headers, run on the CPU through an emulation of the arch layer only
(tests/cdna/emu/tiles_arch_emu.h: one fiber per work-item, real s_barrier semantics, MFMAs written from the
ISA layout definitions). Everything above arch.h is the code that would run on MI300X / MI355X.

This proves the index math (swizzles, transposes, fragment layouts, tile order, ping-pong barrier
structure, edges); it says nothing about speed, and it cannot see missing s_waitcnt (memory is
synchronous here; the schedule checker covers those)."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest
import torch

from tiles.backends.cdna import layouts as L
from tiles.backends.cdna import schedule as S
from tiles.backends.cdna.gemm_probe import gemm_config, render_gemm
from tiles.backends.cdna.lower import CDNALowering
from tiles.kernels import SUITE

from .conftest import EMU_DIR, build_host, run

DRIVER = os.path.join(EMU_DIR, "gemm_driver.cpp")


def emulate_gemm(source, arch, din, dout, M, N, K, lda, ldb, ldc, grid, ir_args=False):
    defines = ["KERNEL_NAME=kern", f"EMU_IN_BF16={int(din == 'bf16')}", f"EMU_OUT_BYTES={4 if dout == 'f32' else 2}",
               f"EMU_OUT_BF16={int(dout == 'bf16')}"] + (["EMU_IR_ARGS"] if ir_args else [])
    exe = build_host(source, 950 if arch == "gfx950" else 942, defines, main=DRIVER)
    out = run(exe, M, N, K, lda, ldb, ldc, grid)
    m = re.match(r"maxerr (\S+) ref_scale (\S+) bad_pad (\d+) barriers (\d+)", out)
    assert m, out
    return float(m.group(1)), float(m.group(2)), int(m.group(3)), int(m.group(4))


def tolerance(dout, K, scale):
    # fp32 accumulation of K products of exactly representable inputs, then one rounding to the output
    acc = 4 * K * 2.0**-24 * max(scale, 1.0)
    return acc + scale * {"f32": 0.0, "bf16": 2.0**-8, "f16": 2.0**-11}[dout]


CASES = [
    # arch, mf, din, dout, M, N, K, lda, ldb, ldc
    ("gfx942", 32, "bf16", "f32", 300, 520, 200, 208, 520, 524),  # partial tiles in M, N and K, padded rows
    ("gfx950", 32, "bf16", "f32", 300, 520, 200, 208, 528, 524),
    ("gfx942", 16, "f16", "bf16", 256, 264, 96, 96, 264, 264),
    ("gfx950", 16, "f16", "f16", 130, 256, 136, 136, 256, 256),
    ("gfx950", 32, "bf16", "bf16", 1, 8, 8, 8, 8, 8),  # one row, one 8-vector
]


@pytest.mark.parametrize("arch,mf,din,dout,M,N,K,lda,ldb,ldc", CASES)
def test_emulated_gemm_matches_reference(arch, mf, din, dout, M, N, K, lda, ldb, ldc):
    cfg = gemm_config(arch, din, dout, mf=mf)
    src = render_gemm(arch, din, dout, name="kern", mf=mf)
    grid = cfg.grid(M, N)
    err, scale, bad_pad, barriers = emulate_gemm(src, arch, din, dout, M, N, K, lda, ldb, ldc, grid)
    assert bad_pad == 0, "the kernel wrote into C's padding columns"
    assert err <= tolerance(dout, K, scale), (err, scale)
    # every work-item executed the same number of barriers: 1 + 1 + 8 per K tile (ping-pong, balanced)
    nk = -(-K // cfg.bk)
    assert barriers == grid * 512 * S.barrier_counts(cfg.schedule(), nk)[0]


def test_emulated_gemm_192x256_gfx942():
    cfg = gemm_config("gfx942", mf=16, bm=192)
    src = render_gemm("gfx942", "bf16", "f32", name="kern", mf=16, bm=192)
    err, scale, bad, _ = emulate_gemm(src, "gfx942", "bf16", "f32", 200, 264, 72, 72, 264, 264, cfg.grid(200, 264))
    assert bad == 0 and err <= tolerance("f32", 72, scale)


def test_lowered_ir_gemm_runs_in_emulation():
    """tiles/kernels/gemm.py -> IR -> lower.py -> source, with the chiplet remap active (chunk 1 makes it
    permute even a 3x3 grid), checked end to end."""
    t = lambda *s, d=torch.bfloat16: torch.empty(s, dtype=d, device="meta")
    M, N, K = 600, 520, 64
    k = SUITE["gemm"].trace(t(M, K), t(K, N), t(M, N, d=torch.float32), BM=256, BN=256, BK=64, group=2)
    low = CDNALowering(k, "gfx950", chunk=1).lower()
    src = low.source.replace(low.entry, "kern")
    err, scale, bad, _ = emulate_gemm(src, "gfx950", "bf16", "f32", M, N, K, K, N, N, 9, ir_args=True)
    assert bad == 0 and err <= tolerance("f32", K, scale)


def test_unbalanced_barriers_deadlock_in_emulation():
    # the emulator has real barrier semantics: drop the rebalancing barrier and the block must hang
    src = render_gemm("gfx942", name="kern").replace("if (g == 0) arch::barrier();", "")
    with pytest.raises(AssertionError, match="deadlock|unbalanced"):
        emulate_gemm(src, "gfx942", "bf16", "f32", 64, 64, 64, 64, 64, 64, 1)


# ---------------------------------------------------------------- ops.h (reductions, broadcasts, masks)

OPS_KERNEL = r'''
#include "tiles/ops.h"
#include "tiles/load.h"
#include <cstdio>
#include <vector>
using namespace tiles;
constexpr int R = 64, C = 64, MF = EMU_MF;
static std::vector<float> X(R * C), SOFT(R * C), MASKED(R * C), ROWMAX(R), COLSUM(C);
TILES_KERNEL(64) void opsk() {
  auto gx = make_view<4>(X.data(), R, C, C);
  rt_acc<R, C, MF> t, m;
  load<dt::f32>(t, gx, 0, 0);
  copy(m, t);
  rv_row<R, MF> rm, rs;
  rv_col<C, MF> cs;
  row_max(rm, t);
  col_sum(cs, t);
  sub_row(t, t, rm);
  exp2(t, t);
  row_sum(rs, t);
  div_row(t, t, rs);                    // row softmax (base 2)
  store<dt::f32>(make_view<4>(SOFT.data(), R, C, C), t, 0, 0);
  mask_causal(m, 8, 0, 0, -1.0f);       // tile origin (row0 = 8, col0 = 0)
  mask_cols(m, 0, 60, -2.0f);
  store<dt::f32>(make_view<4>(MASKED.data(), R, C, C), m, 0, 0);
  const int lane = (int)arch::lane_id();
  for (int i = 0; i < R / MF; ++i)
    for (int r = 0; r < rt_acc<R, C, MF>::nreg; ++r) ROWMAX[rt_acc<R, C, MF>::row_of(lane, i, r)] = rm.v[i][r];
  for (int j = 0; j < C / MF; ++j) COLSUM[rt_acc<R, C, MF>::col_of(lane, j)] = cs.v[j];
}
static void body() { opsk(); }
int main() {
  FILE* f = fopen(EMU_IN, "rb"); fread(X.data(), 4, R * C, f); fclose(f);
  tiles::emu::run_block(0, 64, body);
  f = fopen(EMU_OUT, "wb");
  fwrite(SOFT.data(), 4, R * C, f); fwrite(MASKED.data(), 4, R * C, f); fwrite(ROWMAX.data(), 4, R, f); fwrite(COLSUM.data(), 4, C, f);
  fclose(f);
}
'''


@pytest.mark.parametrize("mf", [32, 16])
def test_emulated_ops(tmp_path, mf):
    """Reductions, the base-2 softmax, masks. Run twice: on finite data, where every output is checked,
    then with one row all -inf, which must leave the other rows alone. That row itself comes out NaN:
    its maximum is -inf and -inf - -inf is NaN (the attention kernels start their running maximum at a
    finite -1e30 for this reason, so a row that sees no key gives zeros)."""
    rng = np.random.default_rng(mf)
    x = rng.standard_normal((64, 64)).astype(np.float32)
    fin, fout = tmp_path / "x.bin", tmp_path / "y.bin"
    exe = build_host(OPS_KERNEL, 942, [f"EMU_MF={mf}", f'EMU_IN="{fin}"', f'EMU_OUT="{fout}"'])

    def ops(x):
        x.tofile(fin)
        run(exe)
        y = np.fromfile(fout, dtype=np.float32)
        return y[:4096].reshape(64, 64), y[4096:8192].reshape(64, 64), y[8192:8256], y[8256:]

    def softmax(x):
        with np.errstate(invalid="ignore"):
            e = np.exp2(x - x.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)
    soft, masked, rowmax, colsum = ops(x)
    assert np.array_equal(rowmax, x.max(axis=1))
    np.testing.assert_allclose(colsum, x.sum(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(soft, softmax(x), rtol=1e-5, atol=1e-6)
    want = x.copy()
    r, c = np.meshgrid(np.arange(64), np.arange(64), indexing="ij")
    want[c > r + 8] = -1.0
    want[c >= 60] = -2.0
    np.testing.assert_array_equal(masked, want)

    x[3, :] = -np.inf
    soft, _, rowmax, _ = ops(x)
    rest = np.arange(64) != 3
    assert np.array_equal(rowmax, x.max(axis=1))
    np.testing.assert_allclose(soft[rest], softmax(x)[rest], rtol=1e-5, atol=1e-6)
    assert np.isnan(soft[3]).all()


# ---------------------------------------------------------------- index math of the headers vs the Python data

PROBE = r'''
#include "tiles/rt.h"
#include "tiles/st.h"
#include "tiles/grid.h"
#include <cstdio>
using namespace tiles;
int main() {
  for (int l = 0; l < 64; ++l) for (int r = 0; r < 16; ++r) printf("acc32 %d %d %d %d\n", l, r, rt_acc<32, 32, 32>::row_of(l, 0, r), rt_acc<32, 32, 32>::col_of(l, 0));
  for (int l = 0; l < 64; ++l) for (int r = 0; r < 4; ++r) printf("acc16 %d %d %d %d\n", l, r, rt_acc<16, 16, 16>::row_of(l, 0, r), rt_acc<16, 16, 16>::col_of(l, 0));
  for (int l = 0; l < 64; ++l) printf("op32 %d %d %d\n", l, rt_op<32, 16, 32>::row_of(l, 0), rt_op<32, 16, 32>::k_of(l, 0));
  for (int l = 0; l < 64; ++l) printf("op16 %d %d %d\n", l, rt_op<16, 32, 16>::row_of(l, 0), rt_op<16, 32, 16>::k_of(l, 0));
  for (int r = 0; r < 64; ++r) for (int c = 0; c < 64; c += 8) printf("stA %d %d %u\n", r, c, st<64, 64, 0, 1, 7>::offset(r, c));
  for (int r = 0; r < 64; ++r) for (int c = 0; c < 32; c += 2) printf("stB %d %d %u\n", r, c, st<64, 32, 0, 31, 7>::offset(r, c));
  for (int r = 0; r < 32; ++r) for (int c = 0; c < 128; c += 4) printf("stP %d %d %u\n", r, c, st<32, 128, 0, 1, 15, 256>::offset(r, c));
  for (int r = 0; r < 64; ++r) for (int c = 0; c < 64; c += 8) printf("stQ %d %d %u\n", r, c, st<64, 64, 0, 31, 15, 256>::offset(r, c));
  for (int w = 0; w < 1100; ++w) printf("remap %d %d\n", w, chiplet_remap(w, 1100, 8, 16));
  for (int i = 0; i < 91; ++i) { tile_rc t = grouped_tile(i, 7, 13, 3); printf("group %d %d %d\n", i, t.m, t.n); }
  return 0;
}
'''


def test_header_index_math_matches_python():
    out = run(build_host(PROBE, 942))
    rows = [line.split() for line in out.splitlines()]
    n = 0
    for f in rows:
        kind, v = f[0], list(map(int, f[1:]))
        if kind == "acc32":
            assert (v[2], v[3]) == L.MFMA[("gfx942", 32)].c.coord(v[0], v[1])
        elif kind == "acc16":
            assert (v[2], v[3]) == L.MFMA[("gfx950", 16)].c.coord(v[0], v[1])
        elif kind == "op32":
            assert (v[1], v[2]) == L.Logical(32).operand(v[0], 0)
        elif kind == "op16":
            assert (v[1], v[2]) == L.Logical(16).operand(v[0], 0)
        elif kind == "stA":
            assert v[2] == L.Swizzle(0, 1, 7).offset(v[0], v[1], 128)
        elif kind == "stB":
            assert v[2] == L.Swizzle(0, None, 7).offset(v[0], v[1], 64)
        elif kind == "stP":  # 256-byte (line-pair) blocks, as gfx950's 256-byte rows use them
            assert v[2] == L.Swizzle(0, 1, 15, 256).offset(v[0], v[1], 256)
        elif kind == "stQ":  # 128-byte rows, two per block
            assert v[2] == L.Swizzle(0, None, 15, 256).offset(v[0], v[1], 128)
        elif kind == "remap":
            assert v[1] == S.chiplet_remap(v[0], 1100, 8, 16)
        elif kind == "group":
            assert (v[1], v[2]) == S.grouped_tile(v[0], 7, 13, 3)
        n += 1
    assert n == 64 * 16 + 64 * 4 + 64 + 64 + 64 * 8 + 64 * 16 + 32 * 32 + 64 * 8 + 1100 + 91
