// tiles/rt.h — register tiles and row vectors in the wgmma fragment layout.
//
// A register tile is owned by ONE warpgroup (4 consecutive warps, 128 threads). Its rows come in
// 64-row slices, one wgmma M each. Every thread holds its elements as PAIRS of adjacent columns, in
// the m64nNk16 accumulator order (tiles/backends/hopper/layouts.py is the authoritative table; the
// layout probe checks it on the GPU):
//
//   thread t = 32 w + l (warp w, lane l), slice s, pair p (0 <= p < C/4):
//     row = 64 s + 16 w + l / 4 + 8 (p % 2)
//     col = 8 (p / 2) + 2 (l % 4) + e           e = 0, 1: the two elements of the pair
//
// fp32 tiles keep a pair as float2 (two registers: exactly the wgmma accumulator registers
// d[2p], d[2p+1]). 16-bit tiles keep a pair packed in one u32, and then pairs 4k..4k+3 of a slice are
// exactly the four A-operand registers (a0a1, a2a3, a4a5, a6a7) of the 64 x 16 block of columns
// [16k, 16k+16): casting an accumulator to bf16 yields an A operand with no data movement.
#pragma once
#include "arch.h"

namespace tiles {

template <typename T> struct pair_of;
template <> struct pair_of<float> { using type = float2; };
template <> struct pair_of<bf16> { using type = u32; };
template <> struct pair_of<f16> { using type = u32; };

// Index of this thread inside its warpgroup (0..127).
__device__ __forceinline__ int wg_thread() { return threadIdx.x & 127; }
__device__ __forceinline__ int warpgroup_id() { return threadIdx.x >> 7; }

// Row (within the tile) of pair p of slice s held by warpgroup thread t.
__device__ __forceinline__ int frag_row(int t, int s, int p) { return 64 * s + 16 * (t >> 5) + ((t & 31) >> 2) + 8 * (p & 1); }
// Column of the first element of pair p held by warpgroup thread t.
__device__ __forceinline__ int frag_col(int t, int p) { return 8 * (p >> 1) + 2 * (t & 3); }

template <typename T, int R, int C> struct rt {
  using dtype = T;
  using pair_t = typename pair_of<T>::type;
  static constexpr int rows = R, cols = C;
  static constexpr int slices = R / 64;
  static constexpr int pairs = C / 4;  // per thread per slice
  static_assert(R % 64 == 0, "register tile rows must be a multiple of 64 (one wgmma M per slice)");
  static_assert(C % 8 == 0, "register tile cols must be a multiple of 8 (wgmma N granularity)");
  static_assert(sizeof(T) == 4 || C % 16 == 0, "16-bit register tiles need cols % 16 == 0 (wgmma K)");
  pair_t v[slices][pairs];
};

template <int R, int C> using rt_fl = rt<float, R, C>;
template <int R, int C> using rt_bf = rt<bf16, R, C>;
template <int R, int C> using rt_hf = rt<f16, R, C>;

// Row vector: one fp32 value per row of an R-row register tile (TK's col_vec). Each thread keeps the
// two rows its fragment touches in every slice: h = 0 → row l/4, h = 1 → row l/4 + 8 (of its warp's
// 16). The four threads of a quad (same l/4) hold the same rows and, after a reduction, equal values.
template <int R> struct rv {
  static constexpr int rows = R, slices = R / 64;
  static_assert(R % 64 == 0, "row vector length must be a multiple of 64");
  float v[slices][2];
};

// Column vector: one fp32 value per COLUMN of a C-column register tile (TK's row_vec). It is what a
// row vector of the tile program becomes when the tiles it scales are held transposed (attention's
// dK/dV kernel keeps Sᵀ, Pᵀ, dPᵀ with keys as rows: the query-indexed LSE and Delta then run along
// the columns). Columns are not split over the warps, and the 8 lanes of a warp that share a column
// would each keep a copy in the fragment order (C / 4 registers a thread); instead lane l of every
// warp keeps columns l, l + 32, ... (C / 32 registers) and a broadcast fetches a pair's values with
// two shuffles (ops.h map_col).
template <int C> struct cv {
  static constexpr int cols = C, per_lane = (C + 31) / 32;
  static_assert(C % 8 == 0, "column vector length must be a multiple of 8");
  float v[per_lane];
};

}  // namespace tiles
