// tiles CDNA block-scaled fp8 GEMM pieces (templates/gemm_fp8.hip.j2, lowered by lower_fp8.py): byte tiles in
// LDS, the k-contiguous fp8 stage (global -> registers -> LDS, a partial last K block zeroed in registers), fp8
// MFMA operands, the per-K-block promotion and the scale loads. Ordinary C++ over arch.h (arch::mfma32_fp8 /
// mfma16_fp8), so both emulators run it unchanged.
#pragma once
#include "load.h"
#include "ops.h"

namespace tiles {

// A ROWS x RB-byte LDS tile of 8-bit values, rows k-contiguous, whose 16-byte chunks are XOR-swizzled inside
// each 128-byte line: chunk' = chunk ^ (((line >> S1) ^ (line >> S2)) & MASK), S2 = 31: unused. The swizzle
// comes from the bank model (lower_fp8.fp8_swizzle, layouts.py) for the read and write widths used here.
template <int ROWS, int RB, int S1 = 0, int S2 = 31, int MASK = 0>
struct st8 {
  static constexpr int rows = ROWS, row_bytes = RB, bytes = ROWS * RB;
  static_assert(RB % 128 == 0, "fp8 LDS rows are whole 128-byte lines");
  static_assert(MASK <= 7, "8 chunks per 128-byte line");
  TILES_HD u32 swz(u32 line) { return ((line >> S1) ^ (S2 < 31 ? (line >> S2) : 0u)) & (u32)MASK; }
  // byte offset of byte c of row r
  TILES_HD u32 offset(u32 r, u32 c) {
    const u32 lin = r * (u32)RB + c;
    const u32 line = lin >> 7, chunk = (lin >> 4) & 7u;
    return (line << 7) | ((chunk ^ swz(line)) << 4) | (lin & 15u);
  }
};

// ------------------------------------------------------------------ k-contiguous fp8 stage
// ROWS x KB bytes of a k-contiguous 8-bit matrix (gview<1>: rows, cols = K, ld in bytes), loaded by THREADS
// threads as 16-byte vectors: thread t takes vector t % (KB/16) of row t / (KB/16), then t + THREADS, ...
// A vector that starts inside K is loaded whole (the row stride is a multiple of 16 bytes, so it stays in the
// row's storage) and its bytes past K are zeroed when it is written to LDS; rows past the view read 0.
template <int ROWS, int KB, int THREADS>
struct stage8 {
  static constexpr int cpr = KB / 16, total = ROWS * cpr, n = total / THREADS;
  static_assert(KB % 16 == 0 && total % THREADS == 0, "the fp8 stage must split evenly into 16-byte vectors");
  u32x4 v[n];
};
template <int ROWS, int KB, int THREADS>
TILES_DEV void load_stage8(stage8<ROWS, KB, THREADS>& s, const gview<1>& g, int k0, u32 tid) {
#pragma unroll
  for (int p = 0; p < s.n; ++p) {
    const int t = (int)tid + p * THREADS, r = t / s.cpr, c = k0 + (t % s.cpr) * 16;
    const bool in = (r < g.rows) & (c < g.cols);
    arch::buffer_load_b128_async(s.v[p], g.r, in ? (u32)(r * g.ld + c) : arch::kOob);
  }
}
// bytes [n, 16) of v set to 0 (n <= 0: all of them)
TILES_DEV u32x4 keep_bytes(u32x4 v, int n) {
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const int keep = n - 4 * w;
    const u32 m = keep >= 4 ? 0xffffffffu : keep <= 0 ? 0u : (1u << (8 * keep)) - 1u;
    v[w] = v[w] & m;
  }
  return v;
}
template <class ST, int ROWS, int KB, int THREADS>
TILES_DEV void store_stage8(u32 lds, const stage8<ROWS, KB, THREADS>& s, int kvalid, u32 tid) {
  static_assert(ST::rows == ROWS && ST::row_bytes == KB, "stage and LDS tile shapes differ");
#pragma unroll
  for (int p = 0; p < s.n; ++p) {
    const int t = (int)tid + p * THREADS, r = t / s.cpr, c = (t % s.cpr) * 16;
    u32x4 v = s.v[p];
    if (c + 16 > kvalid) v = keep_bytes(v, kvalid - c);  // the partial last K block
    arch::lds_write_b128(lds + ST::offset(r, c), v);
  }
}

// ------------------------------------------------------------------ fp8 MFMA operands
// ROWS x KB bytes of an operand as the fp8 MFMA steps take it: per row block of MF rows and k-slab of
// SLAB = 16 * 64 / MF bytes (32 for MF = 32, 64 for MF = 16), lane l holds row l % MF and bytes
// 16 (l / MF) .. +15 of the slab (one ds_read_b128). One MFMA step (arch.h) takes two consecutive slabs.
template <int ROWS, int KB, int MF>
struct rt8_op {
  static constexpr int slab = 16 * 64 / MF, rb = ROWS / MF, kb = KB / slab;
  static_assert(ROWS % MF == 0 && KB % (2 * slab) == 0, "fp8 operands are whole row blocks and MFMA steps");
  u32x4 c[rb][kb];
  TILES_HD int row_of(int lane, int i) { return i * MF + lane % MF; }
  TILES_HD int k_of(int lane, int s) { return s * slab + 16 * (lane / MF); }
};
template <class ST, int ROWS, int KB, int MF>
TILES_DEV void load_op8(rt8_op<ROWS, KB, MF>& d, u32 lds, int row0, int k0) {
  const int lane = (int)arch::lane_id();
#pragma unroll
  for (int i = 0; i < d.rb; ++i)
#pragma unroll
    for (int s = 0; s < d.kb; ++s) d.c[i][s] = arch::lds_read_b128(lds + ST::offset(row0 + d.row_of(lane, i), k0 + d.k_of(lane, s)));
}
// acc[i][j] += sum_k a[i][k] * b[j][k] (both operands k-contiguous), in fp8 MFMA steps
template <int RA, int RB, int KB, int MF>
TILES_DEV void mma8_ABt(rt_acc<RA, RB, MF>& acc, const rt8_op<RA, KB, MF>& a, const rt8_op<RB, KB, MF>& b) {
#pragma unroll
  for (int s = 0; s < rt8_op<RA, KB, MF>::kb; s += 2)
#pragma unroll
    for (int i = 0; i < RA / MF; ++i)
#pragma unroll
      for (int j = 0; j < RB / MF; ++j) {
        if constexpr (MF == 32) acc.d[i][j] = arch::mfma32_fp8(a.c[i][s], a.c[i][s + 1], b.c[j][s], b.c[j][s + 1], acc.d[i][j]);
        else acc.d[i][j] = arch::mfma16_fp8(a.c[i][s], a.c[i][s + 1], b.c[j][s], b.c[j][s + 1], acc.d[i][j]);
      }
}

// every block of acc computed at this point of the program (arch::materialize): the MFMAs stay ahead of the
// stage's s_waitcnt vmcnt(0) and LDS writes that follow, so the global loads overlap them
template <int R, int C, int MF>
TILES_DEV void materialize(rt_acc<R, C, MF>& acc) {
#pragma unroll
  for (int i = 0; i < R / MF; ++i)
#pragma unroll
    for (int j = 0; j < C / MF; ++j) arch::materialize(acc.d[i][j]);
}

// ------------------------------------------------------------------ scales and the promotion
// A strided f32 matrix (the block scales): element (r, c) at (r * s0 + c * s1) * 4 bytes; the buffer covers
// exactly the elements of a rows x cols matrix, anything else reads 0.
struct scales {
  arch::rsrc_t r;
  int rows, cols, s0, s1;
};
TILES_DEV scales make_scales(const float* base, int rows, int cols, int s0, int s1) {
  const long long last = rows > 0 && cols > 0 ? ((long long)(rows - 1) * s0 + (long long)(cols - 1) * s1 + 1) * 4 : 0;
  return scales{arch::make_rsrc(base, (u32)(last > 0x7fffffffLL ? 0x7fffffffLL : last)), rows, cols, s0, s1};
}
TILES_DEV float load_scale(const scales& g, int r, int c) {
  const bool in = (r >= 0) & (r < g.rows) & (c >= 0) & (c < g.cols);
  return __builtin_bit_cast(float, arch::buffer_load_b32(g.r, in ? (u32)((r * g.s0 + c * g.s1) * 4) : arch::kOob));
}
// the row scales of A for the columns of a C^T accumulator (acc columns = rows of C): lane l needs row
// row0 + j * MF + l % MF for each column block j; rows past the view read 0
template <int C, int MF>
TILES_DEV void load_row_scales(rv_col<C, MF>& v, const scales& g, int row0, int kb) {
  const int lane = (int)arch::lane_id();
#pragma unroll
  for (int j = 0; j < C / MF; ++j) v.v[j] = load_scale(g, row0 + j * MF + lane % MF, kb);
}
// B's column scales (row-wise scaling, an (1, N) matrix) for the rows of a C^T accumulator (acc rows =
// columns of C): lane l needs column col0 + i * MF + row(l, r) for each row block i and register r
template <int R, int MF>
TILES_DEV void load_col_scales(rv_row<R, MF>& v, const scales& g, int col0) {
  const int lane = (int)arch::lane_id();
#pragma unroll
  for (int i = 0; i < R / MF; ++i)
#pragma unroll
    for (int r = 0; r < mf_traits<MF>::nreg; ++r) v.v[i][r] = load_scale(g, 0, col0 + i * MF + mf_traits<MF>::row(lane, r));
}
// the promotion once per K block: acc += part * (sa[column] * sb), part being C^T (its columns are rows of C)
template <int R, int C, int MF>
TILES_DEV void promote(rt_acc<R, C, MF>& acc, const rt_acc<R, C, MF>& part, const rv_col<C, MF>& sa, float sb) {
#pragma unroll
  for (int j = 0; j < C / MF; ++j) {
    const float s = sa.v[j] * sb;
#pragma unroll
    for (int i = 0; i < R / MF; ++i)
#pragma unroll
      for (int r = 0; r < rt_acc<R, C, MF>::nreg; ++r) acc.d[i][j][r] += part.d[i][j][r] * s;
  }
}

}  // namespace tiles
