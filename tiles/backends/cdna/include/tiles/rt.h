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

}  // namespace tiles
