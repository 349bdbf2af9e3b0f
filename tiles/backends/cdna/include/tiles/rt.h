// tiles CDNA register tiles, shaped by the MFMA bases (MF = 32 -> 32x32 bases, MF = 16 -> 16x16).
// Layouts (the same data as layouts.py, which the tests check against the ISA definitions):
//  * rt_op<ROWS, K, MF>: a 16-bit matrix operand held as the MFMA wants it, rows x k. Per row block of
//    MF rows and k-slab of KSLAB = 512/MF values, lane l holds row (l % MF) and 8 consecutive k values
//    8*(l / MF) .. +7: one u32x4, loaded by one ds_read_b128.
//  * rt_acc<ROWS, COLS, MF>: fp32 accumulator (the MFMA C/D layout). Per MF x MF base, lane l holds
//    column (l % MF) and NREG registers: reg r is row 8*(r/4) + 4*(l/32) + r%4 (MF = 32) or
//    4*(l/16) + r (MF = 16). Rows of one lane come in runs of 4 consecutive rows.
//  * rv_row / rv_col: one value per row / per column of an rt_acc, replicated the way the lane needs it.
#pragma once
#include "arch.h"

namespace tiles {

template <int MF> struct mf_traits;
template <> struct mf_traits<32> {
  static constexpr int nreg = 16, kslab = 16;
  typedef f32x16 acc_t;
  TILES_HD int row(int lane, int r) { return 8 * (r / 4) + 4 * (lane / 32) + r % 4; }
};
template <> struct mf_traits<16> {
  static constexpr int nreg = 4, kslab = 32;
  typedef f32x4 acc_t;
  TILES_HD int row(int lane, int r) { return 4 * (lane / 16) + r; }
};

template <int ROWS, int K, int MF>
struct rt_op {
  static_assert(ROWS % MF == 0, "operand rows must be a multiple of the MFMA base");
  static constexpr int mf = MF, rows = ROWS, k = K;
  static constexpr int kslab = mf_traits<MF>::kslab;
  static_assert(K % kslab == 0, "operand k must be a multiple of the k-slab (16 for 32x32, 32 for 16x16)");
  static constexpr int rb = ROWS / MF, kb = K / kslab;
  u32x4 c[rb][kb];
  // (row, k) of the first of the 8 values lane holds in chunk (i, s)
  TILES_HD int row_of(int lane, int i) { return i * MF + lane % MF; }
  TILES_HD int k_of(int lane, int s) { return s * kslab + 8 * (lane / MF); }
};

template <int ROWS, int COLS, int MF>
struct rt_acc {
  static_assert(ROWS % MF == 0 && COLS % MF == 0, "accumulator dims must be multiples of the MFMA base");
  static constexpr int mf = MF, rows = ROWS, cols = COLS;
  static constexpr int rb = ROWS / MF, cb = COLS / MF, nreg = mf_traits<MF>::nreg;
  typedef typename mf_traits<MF>::acc_t base_t;
  base_t d[rb][cb];
  TILES_HD int row_of(int lane, int i, int r) { return i * MF + mf_traits<MF>::row(lane, r); }
  TILES_HD int col_of(int lane, int j) { return j * MF + lane % MF; }
};

// one value per row of an rt_acc<ROWS, *, MF>: the lane keeps the rows it holds (rb x nreg values)
template <int ROWS, int MF>
struct rv_row {
  static constexpr int rb = ROWS / MF, nreg = mf_traits<MF>::nreg;
  float v[rb][nreg];
};
// one value per column of an rt_acc<*, COLS, MF>: the lane keeps its columns (cb values)
template <int COLS, int MF>
struct rv_col {
  static constexpr int cb = COLS / MF;
  float v[cb];
};
// one value per row of an ROWS-row tile, spread over the lanes (lane l holds rows l, l + 64, ...: ROWS / 64
// registers, rounded up, instead of rv_row's ROWS / 4); the row ops fetch the value each register needs
// from the lane that holds it (ops.h, e.g. attention backward's LSE and Delta for rt_rp tiles)
template <int ROWS, int MF>
struct rv_lane {
  static_assert(ROWS % 32 == 0, "whole 32-row groups");
  static constexpr int n = (ROWS + 63) / 64;
  float v[n];
};

// acc[i][j] += sum_k a[i][k] * b[j][k]  (both operands k-contiguous: "A times B-transposed")
template <dt T, int RA, int RB, int K, int MF>
TILES_DEV void mma_ABt(rt_acc<RA, RB, MF>& acc, const rt_op<RA, K, MF>& a, const rt_op<RB, K, MF>& b) {
#pragma unroll
  for (int i = 0; i < RA / MF; ++i)
#pragma unroll
    for (int j = 0; j < RB / MF; ++j)
#pragma unroll
      for (int s = 0; s < rt_op<RA, K, MF>::kb; ++s) {
        if constexpr (MF == 32) acc.d[i][j] = arch::mfma32<T>(a.c[i][s], b.c[j][s], acc.d[i][j]);
        else acc.d[i][j] = arch::mfma16<T>(a.c[i][s], b.c[j][s], acc.d[i][j]);
      }
}

// the same with the accumulator held in AGPRs (arch.h mfma32_agpr: the 4-wave interleave GEMM); the
// accumulator must be pinned (pin_agpr) after its initialisation and before it is read
template <dt T, int RA, int RB, int K, int MF>
TILES_DEV void mma_ABt_agpr(rt_acc<RA, RB, MF>& acc, const rt_op<RA, K, MF>& a, const rt_op<RB, K, MF>& b) {
#pragma unroll
  for (int i = 0; i < RA / MF; ++i)
#pragma unroll
    for (int j = 0; j < RB / MF; ++j)
#pragma unroll
      for (int s = 0; s < rt_op<RA, K, MF>::kb; ++s) {
        if constexpr (MF == 32) arch::mfma32_agpr<T>(a.c[i][s], b.c[j][s], acc.d[i][j]);
        else arch::mfma16_agpr<T>(a.c[i][s], b.c[j][s], acc.d[i][j]);
      }
}
template <int ROWS, int COLS, int MF>
TILES_DEV void pin_agpr(rt_acc<ROWS, COLS, MF>& acc) {
#pragma unroll
  for (int i = 0; i < ROWS / MF; ++i)
#pragma unroll
    for (int j = 0; j < COLS / MF; ++j) arch::pin_agpr(acc.d[i][j]);
}

// ------------------------------------------------------------------ transposed tiles (attention's S^T, O^T)
// A logical ROWS x COLS f32 tile held as the MFMA accumulator of its transpose (acc rows = logical
// columns). With ROWS = MF (one wave's query rows), lane l owns logical row (l % MF) whole: a row
// reduction is an in-lane reduction over the registers plus one (MF = 32) or two (MF = 16) xor-shuffles.
// PERM: acc row R holds logical column key_perm<MF>(R), a bit permutation inside each 32-column group
// chosen so that the accumulator registers, converted in place, ARE the B operand (rt_op<MF, COLS, MF>)
// of the next MFMA with k = logical column (no shuffle, no LDS round trip). The A operand that produces
// such a tile is read from LDS with the same permutation (load.h: load_op_perm).
//  MF = 32: acc row rho (0..31) -> swap bits 2 and 3 of rho; MF = 16: (g, r, blk) -> rotate bits 2..4.
template <int MF> TILES_HD int key_perm(int R) {
  const int base = R & ~31, x = R & 31;
  if constexpr (MF == 32) return base | (x & 0x13) | ((x & 4) << 1) | ((x & 8) >> 1);
  else return base | (x & 3) | ((x & 16) >> 2) | ((x & 12) << 1);
}
template <int ROWS, int COLS, int MF, bool PERM>
struct rt_t : rt_acc<COLS, ROWS, MF> {
  typedef rt_acc<COLS, ROWS, MF> acc;
  static constexpr int lrows = ROWS, lcols = COLS;
  // logical (row, col) of acc element (i, j, r) of lane
  TILES_HD int lrow_of(int lane, int j) { return acc::col_of(lane, j); }
  TILES_HD int lcol_of(int lane, int i, int r) { return PERM ? key_perm<MF>(acc::row_of(lane, i, r)) : acc::row_of(lane, i, r); }
};

// The same storage seen the other way round (attention backward dK/dV's S and dP, one wave's MF keys):
// a logical ROWS x COLS tile (rows = queries, cols = keys) held as the accumulator in its own orientation
// (acc = ROWS x COLS), with acc row R holding logical row key_perm<MF>(R) -- the A operand that produced it
// was read with load_op_perm. It IS the permuted transposed tile rt_t<COLS, ROWS, MF, true>, so cast()
// turns it in registers into the operand rt_op<COLS, ROWS, MF> (rows = keys, k = queries): the operand
// of the next MFMA that contracts over the queries (dV^T += dO^T P, dK^T += Q^T dS).
template <int ROWS, int COLS, int MF>
struct rt_rp : rt_t<COLS, ROWS, MF, true> {
  typedef rt_acc<ROWS, COLS, MF> acc;
  TILES_HD int row_of(int lane, int i, int r) { return key_perm<MF>(acc::row_of(lane, i, r)); }
  TILES_HD int col_of(int lane, int j) { return acc::col_of(lane, j); }
};

// B operand (rows = logical rows, k = logical columns) from a permuted transposed tile, converted to
// 16-bit in registers: chunk s of lane l is the 8 values of k-slab s at k = 8 (l / MF) + e.
template <dt T> TILES_DEV u32 pack16(float a, float b) {
  const u32 x = T == dt::bf16 ? arch::f32_to_bf16(a) : arch::f32_to_f16(a);
  const u32 y = T == dt::bf16 ? arch::f32_to_bf16(b) : arch::f32_to_f16(b);
  return x | (y << 16);
}
template <dt T, int ROWS, int COLS, int MF>
TILES_DEV void cast(rt_op<ROWS, COLS, MF>& d, const rt_t<ROWS, COLS, MF, true>& s) {
  static_assert(ROWS == MF, "one MFMA base of logical rows per wave");
#pragma unroll
  for (int sl = 0; sl < rt_op<ROWS, COLS, MF>::kb; ++sl) {
    float v[8];
    if constexpr (MF == 32) {
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = s.d[sl / 2][0][8 * (sl % 2) + e];
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = s.d[2 * sl + e / 4][0][e % 4];
    }
    d.c[0][sl] = u32x4{pack16<T>(v[0], v[1]), pack16<T>(v[2], v[3]), pack16<T>(v[4], v[5]), pack16<T>(v[6], v[7])};
  }
}

}  // namespace tiles
