// tiles/ops.h — the OPS.md vocabulary on warpgroup register tiles (destination first, shapes static).
//
// Every function here is called by all 128 threads of one warpgroup; each thread works on its own
// fragment (rt.h) except the row reductions, which finish with two shuffles inside the lane quad that
// shares a row.
#pragma once
#include "arch.h"
#include "rt.h"
#include "smem.h"

#ifndef INFINITY  // the IR's float constants are spelled INFINITY / -INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

namespace tiles {

// ================================================================ fill, cast
template <int R, int C> __device__ __forceinline__ void fill(rt<float, R, C>& d, float x) {
#pragma unroll
  for (int s = 0; s < d.slices; ++s)
#pragma unroll
    for (int p = 0; p < d.pairs; ++p) d.v[s][p] = make_float2(x, x);
}
template <typename T, int R, int C> __device__ __forceinline__ void fill(rt<T, R, C>& d, float x) {
  const u32 packed = arch::pack2<T>(x, x);
#pragma unroll
  for (int s = 0; s < d.slices; ++s)
#pragma unroll
    for (int p = 0; p < d.pairs; ++p) d.v[s][p] = packed;
}
template <typename T, int R, int C> __device__ __forceinline__ void zero(rt<T, R, C>& d) { fill(d, 0.f); }

// pair conversions used by cast/store
__device__ __forceinline__ float2 pair_to_f2(float2 x) { return x; }
template <typename T> __device__ __forceinline__ float2 pair_to_f2(u32 x) { return arch::unpack2<T>(x); }
template <typename T> __device__ __forceinline__ typename pair_of<T>::type f2_to_pair(float2 x);
template <> __device__ __forceinline__ float2 f2_to_pair<float>(float2 x) { return x; }
template <> __device__ __forceinline__ u32 f2_to_pair<bf16>(float2 x) { return arch::pack2<bf16>(x.x, x.y); }
template <> __device__ __forceinline__ u32 f2_to_pair<f16>(float2 x) { return arch::pack2<f16>(x.x, x.y); }
template <typename T> __device__ __forceinline__ float2 load_pair(const typename pair_of<T>::type& x);
template <> __device__ __forceinline__ float2 load_pair<float>(const float2& x) { return x; }
template <> __device__ __forceinline__ float2 load_pair<bf16>(const u32& x) { return arch::unpack2<bf16>(x); }
template <> __device__ __forceinline__ float2 load_pair<f16>(const u32& x) { return arch::unpack2<f16>(x); }
// a pair of T as a pair of U: through fp32, or as it is where the tile already holds U (a 16-bit
// tile's pairs would otherwise be unpacked and packed again on their way to memory)
template <typename U, typename T> struct pair_cvt {
  static __device__ __forceinline__ typename pair_of<U>::type go(const typename pair_of<T>::type& x) {
    return f2_to_pair<U>(load_pair<T>(x));
  }
};
template <typename T> struct pair_cvt<T, T> {
  static __device__ __forceinline__ typename pair_of<T>::type go(const typename pair_of<T>::type& x) { return x; }
};
template <typename U, typename T>
__device__ __forceinline__ typename pair_of<U>::type convert_pair(const typename pair_of<T>::type& x) {
  return pair_cvt<U, T>::go(x);
}

// dst = src converted (fp32 → bf16 makes a wgmma A fragment; see rt.h).
template <typename U, typename T, int R, int C>
__device__ __forceinline__ void cast(rt<U, R, C>& dst, const rt<T, R, C>& src) {
#pragma unroll
  for (int s = 0; s < src.slices; ++s)
#pragma unroll
    for (int p = 0; p < src.pairs; ++p) dst.v[s][p] = f2_to_pair<U>(load_pair<T>(src.v[s][p]));
}

// ================================================================ elementwise (fp32 tiles)
template <int R, int C, typename F> __device__ __forceinline__ void map(rt<float, R, C>& d, const rt<float, R, C>& a, F f) {
#pragma unroll
  for (int s = 0; s < d.slices; ++s)
#pragma unroll
    for (int p = 0; p < d.pairs; ++p) d.v[s][p] = make_float2(f(a.v[s][p].x), f(a.v[s][p].y));
}
template <int R, int C, typename F>
__device__ __forceinline__ void map2(rt<float, R, C>& d, const rt<float, R, C>& a, const rt<float, R, C>& b, F f) {
#pragma unroll
  for (int s = 0; s < d.slices; ++s)
#pragma unroll
    for (int p = 0; p < d.pairs; ++p)
      d.v[s][p] = make_float2(f(a.v[s][p].x, b.v[s][p].x), f(a.v[s][p].y, b.v[s][p].y));
}

// The elementwise vocabulary (OPS.md), listed once: tiles, row vectors and column vectors each
// instantiate it over their own layout.
#define TILES_UNARY_OPS(X)                                                                               \
  X(exp2, arch::exp2(x)) X(exp, arch::exp2(x * 1.4426950408889634f)) X(log2, arch::log2(x))             \
  X(log, arch::log2(x) * 0.6931471805599453f) X(neg, -x) X(abs, fabsf(x)) X(rsqrt, arch::rsqrt(x)) X(copy, x)
#define TILES_BINARY_OPS(X) X(add, x + y) X(sub, x - y) X(mul, x * y) X(div, x / y) X(max, fmaxf(x, y)) X(min, fminf(x, y))

#define TILES_UNARY(name, expr)                                                              \
  template <int R, int C> __device__ __forceinline__ void name(rt<float, R, C>& d, const rt<float, R, C>& a) { \
    map(d, a, [](float x) { return expr; });                                                 \
  }
TILES_UNARY_OPS(TILES_UNARY)
#undef TILES_UNARY

#define TILES_BINARY(name, expr)                                                                          \
  template <int R, int C>                                                                                 \
  __device__ __forceinline__ void name(rt<float, R, C>& d, const rt<float, R, C>& a, const rt<float, R, C>& b) { \
    map2(d, a, b, [](float x, float y) { return expr; });                                                  \
  }                                                                                                       \
  template <int R, int C> __device__ __forceinline__ void name(rt<float, R, C>& d, const rt<float, R, C>& a, float y) { \
    map(d, a, [y](float x) { return expr; });                                                              \
  }
TILES_BINARY_OPS(TILES_BINARY)
#undef TILES_BINARY

// ================================================================ row reductions and broadcasts
// v[r] = reduce_c t[r, c]; the *_init forms also fold in `init` (the running max / sum of attention).
// QUAD = false stops at each lane's own columns of the row (row_sum_partial).
template <bool IS_MAX, int R, int C, bool QUAD = true>
__device__ __forceinline__ void row_reduce(rv<R>& v, const rt<float, R, C>& t) {
#pragma unroll
  for (int s = 0; s < t.slices; ++s)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float acc = IS_MAX ? fmaxf(t.v[s][h].x, t.v[s][h].y) : t.v[s][h].x + t.v[s][h].y;
#pragma unroll
      for (int p = h + 2; p < t.pairs; p += 2)
        acc = IS_MAX ? fmaxf(acc, fmaxf(t.v[s][p].x, t.v[s][p].y)) : acc + t.v[s][p].x + t.v[s][p].y;
      // the 4 lanes of a quad hold the 4 column pairs of each 8-column group of the same row
      if constexpr (QUAD) {
        acc = IS_MAX ? fmaxf(acc, arch::shfl_xor(acc, 1)) : acc + arch::shfl_xor(acc, 1);
        acc = IS_MAX ? fmaxf(acc, arch::shfl_xor(acc, 2)) : acc + arch::shfl_xor(acc, 2);
      }
      v.v[s][h] = acc;
    }
}
// The same maximum as a tree: a thread's values of a row meet pairwise, halving each round (ceil of
// log2 of them deep instead of a chain of them), both rows of a slice side by side. Max is exact in
// any order, so the answer is the same to the bit; what changes is how long the softmax waits for it.
template <int R, int C> __device__ __forceinline__ void row_max_tree(rv<R>& v, const rt<float, R, C>& t) {
  using tile = rt<float, R, C>;
  constexpr int N = tile::pairs / 2;  // pairs of one row (h) in a slice: p = h, h + 2, ...
  static_assert(tile::pairs % 2 == 0, "whole 8-column groups: both rows of a slice hold as many pairs");
#pragma unroll
  for (int s = 0; s < tile::slices; ++s) {
    float m[2][N];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int i = 0; i < N; ++i) m[h][i] = fmaxf(t.v[s][h + 2 * i].x, t.v[s][h + 2 * i].y);
    // n values left: the last n - w fold onto the first (w = n / 2 rounded up, so an odd one waits a round)
#pragma unroll
    for (int n = N; n > 1; n = (n + 1) / 2)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int i = 0; i < N / 2; ++i)
          if (i < n / 2) m[h][i] = fmaxf(m[h][i], m[h][i + (n + 1) / 2]);  // fixed trip counts: m stays in registers
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float acc = fmaxf(m[h][0], arch::shfl_xor(m[h][0], 1));
      v.v[s][h] = fmaxf(acc, arch::shfl_xor(acc, 2));
    }
  }
}
template <bool TREE, int R, int C> __device__ __forceinline__ void row_max_by(rv<R>& v, const rt<float, R, C>& t) {
  if constexpr (TREE) row_max_tree(v, t); else row_reduce<true>(v, t);
}
template <int R, int C> __device__ __forceinline__ void row_max(rv<R>& v, const rt<float, R, C>& t) { row_reduce<true>(v, t); }
template <int R, int C> __device__ __forceinline__ void row_sum(rv<R>& v, const rt<float, R, C>& t) { row_reduce<false>(v, t); }
// `v` may be `init` itself (row_sum(l, s, l)): the reduction goes to a temporary first.
// TREE: the maximum as a tree (row_max_tree); the same bits.
template <bool TREE = false, int R, int C>
__device__ __forceinline__ void row_max(rv<R>& v, const rt<float, R, C>& t, const rv<R>& init) {
  rv<R> r;
  row_max_by<TREE>(r, t);
#pragma unroll
  for (int s = 0; s < v.slices; ++s) v.v[s][0] = fmaxf(r.v[s][0], init.v[s][0]), v.v[s][1] = fmaxf(r.v[s][1], init.v[s][1]);
}
template <int R, int C> __device__ __forceinline__ void row_sum(rv<R>& v, const rt<float, R, C>& t, const rv<R>& init) {
  rv<R> r;
  row_reduce<false>(r, t);
#pragma unroll
  for (int s = 0; s < v.slices; ++s) v.v[s][0] = r.v[s][0] + init.v[s][0], v.v[s][1] = r.v[s][1] + init.v[s][1];
}

// A running row sum kept as each lane's part (the attention loop's denominator): v = init + the sum of
// the row's columns this lane holds, no shuffle. row_sum_finish adds the four lanes of each quad (the
// row's 4 column pairs of every 8-column group) once, after the loop; scaling v by a row vector in
// between scales every part alike.
template <int R, int C> __device__ __forceinline__ void row_sum_partial(rv<R>& v, const rt<float, R, C>& t, const rv<R>& init) {
  rv<R> r;
  row_reduce<false, R, C, false>(r, t);
#pragma unroll
  for (int s = 0; s < v.slices; ++s) v.v[s][0] = r.v[s][0] + init.v[s][0], v.v[s][1] = r.v[s][1] + init.v[s][1];
}
template <int R> __device__ __forceinline__ void row_sum_finish(rv<R>& v) {
#pragma unroll
  for (int s = 0; s < v.slices; ++s)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      v.v[s][h] += arch::shfl_xor(v.v[s][h], 1);
      v.v[s][h] += arch::shfl_xor(v.v[s][h], 2);
    }
}

template <int R, int C, typename F>
__device__ __forceinline__ void map_row(rt<float, R, C>& d, const rt<float, R, C>& t, const rv<R>& v, F f) {
#pragma unroll
  for (int s = 0; s < d.slices; ++s)
#pragma unroll
    for (int p = 0; p < d.pairs; ++p) {
      const float y = v.v[s][p & 1];
      d.v[s][p] = make_float2(f(t.v[s][p].x, y), f(t.v[s][p].y, y));
    }
}
template <int R, int C> __device__ __forceinline__ void add_row(rt<float, R, C>& d, const rt<float, R, C>& t, const rv<R>& v) {
  map_row(d, t, v, [](float x, float y) { return x + y; });
}
template <int R, int C> __device__ __forceinline__ void sub_row(rt<float, R, C>& d, const rt<float, R, C>& t, const rv<R>& v) {
  map_row(d, t, v, [](float x, float y) { return x - y; });
}
template <int R, int C> __device__ __forceinline__ void mul_row(rt<float, R, C>& d, const rt<float, R, C>& t, const rv<R>& v) {
  map_row(d, t, v, [](float x, float y) { return x * y; });
}
// Safe division: a row whose divisor is 0 (fully masked attention row) becomes 0, not NaN. One
// reciprocal a row and a multiply an element: a division an element is a dozen instructions and a
// slow-path call (FCHK), 64 of them in each warpgroup's attention epilogue.
template <int R> __device__ __forceinline__ rv<R> safe_reciprocal(const rv<R>& v) {
  rv<R> q;
#pragma unroll
  for (int s = 0; s < v.slices; ++s)
#pragma unroll
    for (int h = 0; h < 2; ++h) q.v[s][h] = v.v[s][h] == 0.f ? 0.f : __frcp_rn(v.v[s][h]);
  return q;
}
template <int R, int C> __device__ __forceinline__ void div_row(rt<float, R, C>& d, const rt<float, R, C>& t, const rv<R>& v) {
  map_row(d, t, safe_reciprocal(v), [](float x, float q) { return q == 0.f ? 0.f : x * q; });
}

// The softmax's scale folded into its exponent, FlashAttention-3's arithmetic: d = 2^(scale·t − v[r]),
// one FFMA and one MUFU.EX2 an element where scaling first costs an FMUL more. The row maximum is then
// taken before scaling: v = max(init, scale · max_c t). Both are exact reorderings only for scale > 0
// (a positive scale commutes with max, and keeps a mask's -inf at -inf); the lowering folds only
// when the launcher has checked that (WarpSpecializedLowering.plan_fold).
template <int R, int C>
__device__ __forceinline__ void exp2_scaled_row(rt<float, R, C>& d, const rt<float, R, C>& t, float scale, const rv<R>& v) {
  map_row(d, t, v, [scale](float x, float y) { return arch::exp2(fmaf(x, scale, -y)); });
}
template <bool TREE = false, int R, int C>
__device__ __forceinline__ void row_max_scaled(rv<R>& v, const rt<float, R, C>& t, float scale, const rv<R>& init) {
  rv<R> r;
  row_max_by<TREE>(r, t);
#pragma unroll
  for (int s = 0; s < v.slices; ++s)
    v.v[s][0] = fmaxf(r.v[s][0] * scale, init.v[s][0]), v.v[s][1] = fmaxf(r.v[s][1] * scale, init.v[s][1]);
}

// ================================================================ column broadcasts (cv, one value per tile column)
// d[r, c] = f(t[r, c], v[c]). Pairs 2 j and 2 j + 1 of a fragment cover columns 8 j + 2 (l % 4) + {0, 1}
// (rows r and r + 8): their two values come from the lanes that keep them, one shuffle each, and serve
// every slice.
template <int R, int C, typename F>
__device__ __forceinline__ void map_col(rt<float, R, C>& d, const rt<float, R, C>& t, const cv<C>& v, F f) {
  const int c = 2 * (arch::lane_id() & 3);
#pragma unroll
  for (int j = 0; j < C / 8; ++j) {
    // 8 j % 32 + 7 < 32: both columns sit in the same register of their lanes
    const float y0 = arch::shfl(v.v[j / 4], 8 * j % 32 + c), y1 = arch::shfl(v.v[j / 4], 8 * j % 32 + c + 1);
#pragma unroll
    for (int s = 0; s < d.slices; ++s)
#pragma unroll
      for (int p = 2 * j; p < 2 * j + 2; ++p) d.v[s][p] = make_float2(f(t.v[s][p].x, y0), f(t.v[s][p].y, y1));
  }
}
template <int R, int C> __device__ __forceinline__ void add_col(rt<float, R, C>& d, const rt<float, R, C>& t, const cv<C>& v) {
  map_col(d, t, v, [](float x, float y) { return x + y; });
}
template <int R, int C> __device__ __forceinline__ void sub_col(rt<float, R, C>& d, const rt<float, R, C>& t, const cv<C>& v) {
  map_col(d, t, v, [](float x, float y) { return x - y; });
}
template <int R, int C> __device__ __forceinline__ void mul_col(rt<float, R, C>& d, const rt<float, R, C>& t, const cv<C>& v) {
  map_col(d, t, v, [](float x, float y) { return x * y; });
}
template <int R, int C> __device__ __forceinline__ void div_col(rt<float, R, C>& d, const rt<float, R, C>& t, const cv<C>& v) {
  map_col(d, t, v, [](float x, float y) { return y == 0.f ? 0.f : x / y; });
}
// exp2_scaled_row's form for a tile held transposed: d = 2^(scale·t − v[c])
template <int R, int C>
__device__ __forceinline__ void exp2_scaled_col(rt<float, R, C>& d, const rt<float, R, C>& t, float scale, const cv<C>& v) {
  map_col(d, t, v, [scale](float x, float y) { return arch::exp2(fmaf(x, scale, -y)); });
}

// ================================================================ masks (tile element (r, c) sits at (row0 + r, col0 + c))
template <int R, int C, typename P> __device__ __forceinline__ void mask_where(rt<float, R, C>& t, float value, P pred) {
  const int th = wg_thread();
#pragma unroll
  for (int s = 0; s < t.slices; ++s)
#pragma unroll
    for (int p = 0; p < t.pairs; ++p) {
      const int r = frag_row(th, s, p), c = frag_col(th, p);
      if (pred(r, c)) t.v[s][p].x = value;
      if (pred(r, c + 1)) t.v[s][p].y = value;
    }
}
// value where col0 + c > row0 + r + offset (offset = Sk - Sq aligns the mask bottom-right).
// Each mask first checks, uniformly over the warpgroup, whether the tile touches the masked region
// at all: a block wholly below the causal diagonal or wholly inside the limits costs one branch.
template <int R, int C> __device__ __forceinline__ void mask_causal(rt<float, R, C>& t, int row0, int col0, int offset, float value) {
  if (col0 + C - 1 <= row0 + offset) return;  // every column visible to every row
  mask_where(t, value, [=](int r, int c) { return col0 + c > row0 + r + offset; });
}
// The causal mask of a TRANSPOSED score tile (rows = keys from col0, columns = queries from row0):
// value where col0 + r > row0 + c + offset. The argument order is the logical tile's, as in mask_causal.
template <int R, int C>
__device__ __forceinline__ void mask_causal_transposed(rt<float, R, C>& t, int row0, int col0, int offset, float value) {
  if (col0 + R - 1 <= row0 + offset) return;  // the last key is visible to the first query
  mask_where(t, value, [=](int r, int c) { return col0 + r > row0 + c + offset; });
}
// A sliding window's left edge: value where col0 + c < row0 + r + offset (the keys before row r's window).
template <int R, int C> __device__ __forceinline__ void mask_window(rt<float, R, C>& t, int row0, int col0, int offset, float value) {
  if (col0 >= row0 + R - 1 + offset) return;  // the first column is inside every row's window
  mask_where(t, value, [=](int r, int c) { return col0 + c < row0 + r + offset; });
}
// mask_window of a TRANSPOSED score tile (rows = keys from col0, columns = queries from row0): value
// where col0 + r < row0 + c + offset. The argument order is the logical tile's, as in mask_window.
template <int R, int C>
__device__ __forceinline__ void mask_window_transposed(rt<float, R, C>& t, int row0, int col0, int offset, float value) {
  if (col0 >= row0 + C - 1 + offset) return;  // the first key is inside the last query's window
  mask_where(t, value, [=](int r, int c) { return col0 + r < row0 + c + offset; });
}
template <int R, int C> __device__ __forceinline__ void mask_cols(rt<float, R, C>& t, int col0, int limit, float value) {
  if (col0 + C <= limit) return;
  mask_where(t, value, [=](int r, int c) { return col0 + c >= limit; });
}
template <int R, int C> __device__ __forceinline__ void mask_rows(rt<float, R, C>& t, int row0, int limit, float value) {
  if (row0 + R <= limit) return;
  mask_where(t, value, [=](int r, int c) { return row0 + r >= limit; });
}

// ================================================================ row vectors (rv, one value per tile row)
// Integer helpers for the IR's scalar expressions. cdiv is (a + b - 1) / b in C's truncating division,
// as on every backend and in the interpreter (tiles/core/ir.py): a true ceiling only for a >= 0.
__host__ __device__ __forceinline__ int ceil_div(int a, int b) { return b ? (a + b - 1) / b : 0; }
__host__ __device__ __forceinline__ int int_min(int a, int b) { return a < b ? a : b; }
__host__ __device__ __forceinline__ int int_max(int a, int b) { return a > b ? a : b; }

template <int R, typename F> __device__ __forceinline__ void map(rv<R>& d, const rv<R>& a, F f) {
#pragma unroll
  for (int s = 0; s < d.slices; ++s) d.v[s][0] = f(a.v[s][0]), d.v[s][1] = f(a.v[s][1]);
}
template <int R> __device__ __forceinline__ void fill(rv<R>& d, float x) {
#pragma unroll
  for (int s = 0; s < d.slices; ++s) d.v[s][0] = d.v[s][1] = x;
}
template <int R> __device__ __forceinline__ void zero(rv<R>& d) { fill(d, 0.f); }
#define TILES_VUNARY(name, expr) \
  template <int R> __device__ __forceinline__ void name(rv<R>& d, const rv<R>& a) { map(d, a, [](float x) { return expr; }); }
TILES_UNARY_OPS(TILES_VUNARY)
#undef TILES_VUNARY
template <int R, typename F> __device__ __forceinline__ void map2(rv<R>& d, const rv<R>& a, const rv<R>& b, F f) {
#pragma unroll
  for (int s = 0; s < d.slices; ++s) d.v[s][0] = f(a.v[s][0], b.v[s][0]), d.v[s][1] = f(a.v[s][1], b.v[s][1]);
}
#define TILES_VBINARY(name, expr)                                                                          \
  template <int R> __device__ __forceinline__ void name(rv<R>& d, const rv<R>& a, const rv<R>& b) {       \
    map2(d, a, b, [](float x, float y) { return expr; });                                                  \
  }                                                                                                        \
  template <int R> __device__ __forceinline__ void name(rv<R>& d, const rv<R>& a, float y) {              \
    map(d, a, [y](float x) { return expr; });                                                              \
  }
TILES_BINARY_OPS(TILES_VBINARY)
#undef TILES_VBINARY
// d[i] = value where pred(ref[i]), else d[i] unchanged.
template <int R, typename P> __device__ __forceinline__ void fill_where(rv<R>& d, const rv<R>& ref, P pred, float value) {
#pragma unroll
  for (int s = 0; s < d.slices; ++s)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if (pred(ref.v[s][h])) d.v[s][h] = value;
}
// dst[(row0 + r) * stride] = v[r] for row0 + r < n: lane 0 of each quad writes the quad's two rows.
template <typename U, int R> __device__ __forceinline__ void store(U* dst, long long stride, int n, const rv<R>& v, int row0) {
  const int th = wg_thread();
  if (th & 3) return;
#pragma unroll
  for (int s = 0; s < v.slices; ++s)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row0 + frag_row(th, s, h);
      if (r < n) dst[(long long)r * stride] = arch::from_float<U>(v.v[s][h]);
    }
}
// v[r] = src[(row0 + r) * stride], 0 past n.
template <typename U, int R> __device__ __forceinline__ void load(rv<R>& v, const U* src, long long stride, int n, int row0) {
  const int th = wg_thread();
#pragma unroll
  for (int s = 0; s < v.slices; ++s)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row0 + frag_row(th, s, h);
      v.v[s][h] = r < n ? arch::to_float(src[(long long)r * stride]) : 0.f;
    }
}

// Column vectors: the same vocabulary, over the lane's C / 32 values.
template <int C, typename F> __device__ __forceinline__ void map(cv<C>& d, const cv<C>& a, F f) {
#pragma unroll
  for (int i = 0; i < d.per_lane; ++i) d.v[i] = f(a.v[i]);
}
template <int C> __device__ __forceinline__ void fill(cv<C>& d, float x) {
#pragma unroll
  for (int i = 0; i < d.per_lane; ++i) d.v[i] = x;
}
template <int C> __device__ __forceinline__ void zero(cv<C>& d) { fill(d, 0.f); }
#define TILES_CUNARY(name, expr) \
  template <int C> __device__ __forceinline__ void name(cv<C>& d, const cv<C>& a) { map(d, a, [](float x) { return expr; }); }
TILES_UNARY_OPS(TILES_CUNARY)
#undef TILES_CUNARY
template <int C, typename F> __device__ __forceinline__ void map2(cv<C>& d, const cv<C>& a, const cv<C>& b, F f) {
#pragma unroll
  for (int i = 0; i < d.per_lane; ++i) d.v[i] = f(a.v[i], b.v[i]);
}
#define TILES_CBINARY(name, expr)                                                                          \
  template <int C> __device__ __forceinline__ void name(cv<C>& d, const cv<C>& a, const cv<C>& b) {       \
    map2(d, a, b, [](float x, float y) { return expr; });                                                  \
  }                                                                                                        \
  template <int C> __device__ __forceinline__ void name(cv<C>& d, const cv<C>& a, float y) {              \
    map(d, a, [y](float x) { return expr; });                                                              \
  }
TILES_BINARY_OPS(TILES_CBINARY)
#undef TILES_CBINARY
// v[c] = src[(col0 + c) * stride], 0 past n: lane l reads columns l, l + 32, ... (a warp's reads are
// consecutive; the four warps read the same addresses and L1 serves the repeats).
template <typename U, int C> __device__ __forceinline__ void load(cv<C>& v, const U* src, long long stride, int n, int col0) {
  const int l = arch::lane_id();
#pragma unroll
  for (int i = 0; i < v.per_lane; ++i) {
    const int c = 32 * i + l;
    v.v[i] = (c < C && col0 + c < n) ? arch::to_float(src[(long long)(col0 + c) * stride]) : 0.f;
  }
}

// The same window from shared memory, where TMA put it (sv): lane l takes columns l, l + 32, ...
template <int C> __device__ __forceinline__ void load(cv<C>& v, const sv<C>& src) {
  const int l = arch::lane_id();
#pragma unroll
  for (int i = 0; i < v.per_lane; ++i) v.v[i] = 32 * i + l < C ? src.data[32 * i + l] : 0.f;
}

// ================================================================ global memory (bounded)
// dst[row0 + r, col0 + c] = src[r, c] for row0 + r < nrows and col0 + c < ncols; converts to U.
// Pairs go out as one 4- or 8-byte store when the row stride keeps them aligned.
// f(s, p, r, c) for every pair (s, p) of a fragment, at tile position (row0 + its row, col0 + its
// first column): the one walk the global loads and stores below share.
template <typename T, int R, int C, typename F>
__device__ __forceinline__ void each_pair(const rt<T, R, C>& t, int row0, int col0, F f) {
  const int th = wg_thread();
#pragma unroll
  for (int s = 0; s < t.slices; ++s)
#pragma unroll
    for (int p = 0; p < t.pairs; ++p) f(s, p, row0 + frag_row(th, s, p), col0 + frag_col(th, p));
}
// ---------------------------------------------------------------- wide stores (option wide_stores)
// A fragment's pair is 4 bytes of a row, and the four lanes of a quad hold 16 consecutive bytes of it:
// one st.global.b32 a pair writes 8 rows x 16 bytes a warp, half of each 32-byte sector. Lanes that
// swap pairs first store N pairs at once (N = 2: 8 bytes, whole sectors; N = 4: 16 bytes, a quarter
// of the instructions).
// After quad_exchange<N>, lane q of a quad holds, in order, the N pairs at columns
// 8 (N blk + q % N) + 2 N (q / N) + 0 .. 2 N - 1 of its row, where it held one pair of each of the N
// column groups N blk .. N blk + N - 1 (blk: the caller's block of N groups). Rounds b = N/2 .. 1:
// lanes q, q ^ b swap the words whose index has bit b unlike their own q; one shuffle a word in all.
template <int N> __device__ __forceinline__ void quad_exchange(u32 (&w)[N]) {
  const int q = arch::lane_id() & 3;
#pragma unroll
  for (int b = N / 2; b >= 1; b /= 2) {
    const bool hi = q & b;
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      const int lo_k = i / b * 2 * b + i % b;  // the i-th word index with bit b clear; lo_k + b has it set
      const u32 y = arch::shfl_xor(hi ? w[lo_k] : w[lo_k + b], b);
      if (hi) w[lo_k] = y; else w[lo_k + b] = y;
    }
  }
}
template <int N> struct words_of;
template <> struct words_of<2> {
  using type = uint2;
  static __device__ __forceinline__ uint2 make(const u32 (&w)[2]) { return make_uint2(w[0], w[1]); }
};
template <> struct words_of<4> {
  using type = uint4;
  static __device__ __forceinline__ uint4 make(const u32 (&w)[4]) { return make_uint4(w[0], w[1], w[2], w[3]); }
};
// dst[row0 + r, col0 + c] = src[r, c] (16-bit U), N pairs a store. False (nothing stored) where the
// rows or the first column do not keep N pairs aligned; the caller then stores pair by pair.
template <int N, typename U, typename T, int R, int C>
__device__ __forceinline__ bool store_wide(U* dst, long long ld, int nrows, int ncols, const rt<T, R, C>& src, int row0,
                                           int col0) {
  static_assert(sizeof(U) == 2 && (N == 2 || N == 4) && C % (8 * N) == 0,
                "wide stores: 16-bit outputs, whole blocks of N column groups");
  if (ld % (2 * N) != 0 || col0 % (2 * N) != 0 || reinterpret_cast<unsigned long long>(dst) % (4 * N) != 0) return false;
  const int th = wg_thread(), q = th & 3;
#ifdef TILES_WHOLE_TILE_STORES
  const bool whole = row0 + R <= nrows && col0 + C <= ncols;
#else
  constexpr bool whole = false;
#endif
#pragma unroll
  for (int s = 0; s < src.slices; ++s)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int blk = 0; blk < C / (8 * N); ++blk) {
        u32 w[N];
#pragma unroll
        for (int j = 0; j < N; ++j) w[j] = convert_pair<U, T>(src.v[s][2 * (N * blk + j) + h]);
        quad_exchange<N>(w);  // every lane, before any test: the shuffles take the whole warp
        const int r = row0 + frag_row(th, s, h), c = col0 + 8 * (N * blk + q % N) + 2 * N * (q / N);
        U* at = dst + (long long)r * ld + c;
        if (whole || (r < nrows && c + 2 * N <= ncols)) {
          *reinterpret_cast<typename words_of<N>::type*>(at) = words_of<N>::make(w);
        } else if (r < nrows) {  // the tile's last columns: element by element
#pragma unroll
          for (int j = 0; j < N; ++j) {
            const float2 x = pair_to_f2<U>(w[j]);
            if (c + 2 * j < ncols) at[2 * j] = arch::from_float<U>(x.x);
            if (c + 2 * j + 1 < ncols) at[2 * j + 1] = arch::from_float<U>(x.y);
          }
        }
      }
  return true;
}

template <typename U, typename T, int R, int C>
__device__ __forceinline__ void store(U* dst, long long ld, int nrows, int ncols, const rt<T, R, C>& src, int row0, int col0) {
#ifdef TILES_WIDE_STORES  // (the lowering's option wide_stores: pairs a store)
  if constexpr (sizeof(U) == 2 && C % (8 * TILES_WIDE_STORES) == 0) {
    if (store_wide<TILES_WIDE_STORES>(dst, ld, nrows, ncols, src, row0, col0)) return;
  }
#endif
  const bool pair_ok = (ld % 2) == 0;
#ifdef TILES_WHOLE_TILE_STORES  // (the lowering's option whole_tile_stores)
  if (pair_ok && row0 + R <= nrows && col0 + C <= ncols) {
    // the whole tile inside (every block but a tail): one store a pair and no test. The tested walk
    // below reloads its bounds between stores, and each reload waits for the last store to have read
    // its registers: dK/dV up to 6 % faster this way; the forward, whose stores overlap the
    // other warpgroup's GEMMs, up to 4 % slower (H200, session 16).
    each_pair(src, row0, col0, [&](int s, int p, int r, int c) {
      *reinterpret_cast<typename pair_of<U>::type*>(dst + (long long)r * ld + c) = convert_pair<U, T>(src.v[s][p]);
    });
    return;
  }
#endif
  each_pair(src, row0, col0, [&](int s, int p, int r, int c) {
    if (r >= nrows) return;
    const float2 x = load_pair<T>(src.v[s][p]);
    U* q = dst + (long long)r * ld + c;
    if (pair_ok && c + 1 < ncols) {
      *reinterpret_cast<typename pair_of<U>::type*>(q) = f2_to_pair<U>(x);
    } else {
      if (c < ncols) q[0] = arch::from_float<U>(x.x);
      if (c + 1 < ncols) q[1] = arch::from_float<U>(x.y);
    }
  });
}
// Registers → shared: dst[dst_row0 + r, c] = src[r, src_col0 + c], converted to dst's type, in the
// swizzled layout TMA stores and wgmma read. A 16-bit tile into a 16-bit one goes four pairs a
// stmatrix (ACC_STMATRIX: an f32 one too, converted first, see store_stmatrix); otherwise each pair is
// one 4- or 8-byte st.shared; the swizzle spreads a warp's 8 rows over different banks. Follow with
// arch::fence_proxy_async() before a TMA store or a wgmma reads the tile.
template <bool ACC_STMATRIX = false, typename U, int RD, int C, int SW, typename T, int R, int C2>
__device__ __forceinline__ void store(st<U, RD, C, SW>& dst, int dst_row0, const rt<T, R, C2>& src, int src_col0) {
  static_assert(C % 8 == 0 && C2 % C == 0, "the shared tile takes whole 8-column groups of the register tile");
  static_assert(RD % R == 0, "the register tile is a whole number of the shared tile's row blocks");
  const int th = wg_thread();
  const int p0 = src_col0 / 4;  // 4 columns of the tile per pair index (2 pairs per 8-column group)
#ifndef TILES_NO_STMATRIX
  if constexpr (sizeof(U) == 2 && (sizeof(T) == 2 || ACC_STMATRIX) && C % 16 == 0) {
    if (src_col0 % 16 == 0) {
      // into 16 bits: four pairs (two 8-row blocks x two 8-column groups) a stmatrix. Lane l
      // addresses row l % 8 of matrix l / 8: row block (l / 8) % 2, column group l / 16; each row's
      // eight elements are one 16-byte chunk, which the swizzle moves whole.
      const int l = th & 31, r = 16 * (th >> 5) + 8 * ((l >> 3) & 1) + (l & 7), c = 8 * (l >> 4);
#pragma unroll
      for (int s = 0; s < src.slices; ++s)
#pragma unroll
        for (int q = 0; q < C / 4; q += 4) {
          const int p = p0 + q;
          arch::stmatrix_x4(arch::smem_addr(&dst.at(dst_row0 + 64 * s + r, 4 * q + c)),
                            convert_pair<U, T>(src.v[s][p]), convert_pair<U, T>(src.v[s][p + 1]),
                            convert_pair<U, T>(src.v[s][p + 2]), convert_pair<U, T>(src.v[s][p + 3]));
        }
      return;
    }
  }
#endif
#pragma unroll
  for (int s = 0; s < src.slices; ++s)
#pragma unroll
    for (int q = 0; q < C / 4; ++q) {
      const int p = p0 + q;
      *reinterpret_cast<typename pair_of<U>::type*>(
          &dst.at(dst_row0 + frag_row(th, s, p), frag_col(th, p) - src_col0)) = convert_pair<U, T>(src.v[s][p]);
    }
}
// the epilogue's form: dst has src's rows, and takes columns src_col0 .. of it
template <typename U, int R, int C, int SW, typename T, int C2>
__device__ __forceinline__ void store(st<U, R, C, SW>& dst, const rt<T, R, C2>& src, int src_col0) {
  store(dst, 0, src, src_col0);
}
// An f32 accumulator into a 16-bit tile four pairs a stmatrix as well: converted first, its pairs sit
// where a 16-bit tile's do. Not store's default: option ring_store's staged O ran 1.00-1.015x faster with
// it, the D = 64 forward's staging tiles (option tma_store) 1-3 % slower (H200, session 37).
template <typename U, int R, int C, int SW, int C2>
__device__ __forceinline__ void store_stmatrix(st<U, R, C, SW>& dst, const rt<float, R, C2>& src, int src_col0) {
  static_assert(sizeof(U) == 2, "stmatrix writes 16-bit elements");
  store<true>(dst, 0, src, src_col0);
}
// the form each consumer warpgroup uses for its rows of a tile they share
template <typename U, int RD, int C, int SW, typename T, int R>
__device__ __forceinline__ void store(st<U, RD, C, SW>& dst, int dst_row0, const rt<T, R, C>& src) {
  store(dst, dst_row0, src, 0);
}
// dst[row0 + r, col0 + c] += src[r, c] atomically (one red.global.add.f32 an element), for
// row0 + r < nrows and col0 + c < ncols. (A tile held transposed goes through reduce_add_async.)
template <typename T, int R, int C>
__device__ __forceinline__ void store_add(float* dst, long long ld, int nrows, int ncols, const rt<T, R, C>& src,
                                          int row0, int col0) {
  each_pair(src, row0, col0, [&](int s, int p, int r, int c) {
    if (r >= nrows) return;
    const float2 x = load_pair<T>(src.v[s][p]);
    float* q = dst + (long long)r * ld + c;
    if (c < ncols) atomicAdd(q, x.x);
    if (c + 1 < ncols) atomicAdd(q + 1, x.y);
  });
}
// A tile held transposed (src[r, c] is the logical element [c, r]) into a shared tile in the logical
// orientation: dst[c, r] = src[r, c], 4-byte stores. For each register, a warp's lanes write 8
// consecutive columns of 4 even rows, which the 128-byte swizzle puts in different banks.
template <int RD, int CD, int SW, int R, int C>
__device__ __forceinline__ void store_transposed(st<float, RD, CD, SW>& dst, const rt<float, R, C>& src) {
  static_assert(RD == C && CD == R, "dst is src's transpose");
  const int th = wg_thread();
#pragma unroll
  for (int s = 0; s < src.slices; ++s)
#pragma unroll
    for (int p = 0; p < src.pairs; ++p) {
      const int r = frag_row(th, s, p), c = frag_col(th, p);
      dst.at(c, r) = src.v[s][p].x;
      dst.at(c + 1, r) = src.v[s][p].y;
    }
}
// Adds a shared f32 tile into global memory through TMA (cp.reduce.async.bulk.tensor ... add), one box
// per column chunk; c0 is the tile's first column, c1..c3 the outer coordinates. One thread issues;
// the caller commits the bulk group and waits for its reads before writing the tile again.
template <int R, int C, int SW>
__device__ __forceinline__ void reduce_add_async(const tma_map* map, const st<float, R, C, SW>& src, int c0, int c1,
                                                 int c2, int c3) {
  using S = st<float, R, C, SW>;
#pragma unroll
  for (int j = 0; j < S::chunks; ++j)
    arch::tma_reduce_add_4d(map, src.addr() + j * S::chunk_bytes, c0 + j * S::chunk_cols, c1, c2, c3);
}
// dst[r, c] = src[row0 + r, col0 + c]; elements outside (nrows, ncols) read 0.
template <typename T, typename U, int R, int C>
__device__ __forceinline__ void load(rt<T, R, C>& dst, const U* src, long long ld, int nrows, int ncols, int row0, int col0) {
  each_pair(dst, row0, col0, [&](int s, int p, int r, int c) {
    float2 x = make_float2(0.f, 0.f);
    if (r < nrows) {
      const U* q = src + (long long)r * ld + c;
      if (c < ncols) x.x = arch::to_float(q[0]);
      if (c + 1 < ncols) x.y = arch::to_float(q[1]);
    }
    dst.v[s][p] = f2_to_pair<T>(x);
  });
}

// Shared → registers, 16-bit: dst[r, c] = src[src_row0 + r, c], one 4-byte read a pair. For an A
// operand the loop reads again and again (option resident): loaded once a tile, it is read from
// registers by every wgmma after, which then reads only B from shared memory. A warp's lanes read 8
// rows x 4 words a pair; the swizzle puts the 8 rows' 16-byte pieces in different banks.
template <typename T, int R, int C, int RS, int SW>
__device__ __forceinline__ void load(rt<T, R, C>& dst, const st<T, RS, C, SW>& src, int src_row0) {
  static_assert(sizeof(T) == 2, "registers loaded from a shared tile are an A operand: 16-bit");
  static_assert(RS % R == 0, "the register tile is a whole number of the shared tile's row blocks");
  const int th = wg_thread();
#pragma unroll
  for (int s = 0; s < dst.slices; ++s)
#pragma unroll
    for (int p = 0; p < dst.pairs; ++p)
      dst.v[s][p] = *reinterpret_cast<const u32*>(&src.at(src_row0 + frag_row(th, s, p), frag_col(th, p)));
}

// ================================================================ mma (wgmma, asynchronous)
// acc(R x N) (+)= A(R x K) @ B(K x N), issued by one warpgroup as R/64 x K/16 wgmma.m64nNk16.
// The operation is ASYNC: it is started here; mma_commit() closes the group and mma_wait<n>(acc) waits
// until at most n groups are pending. Shared operands must stay untouched until then.
//   a: shared K-major tile (rows a_row0 .. a_row0+R of a CTA-wide tile), or a register tile (16-bit)
//   b: shared tile K x N (MN-major, i.e. B row-major: wgmma transpose bit)  — mma_AB
//      shared tile N x K (K-major, i.e. B^T given)                            — mma_ABt
// accumulate = false → acc = A @ B (the first k-step uses scale-d = 0).
template <int R, int N> __device__ __forceinline__ void mma_fence(rt<float, R, N>& acc) {
#pragma unroll
  for (int s = 0; s < acc.slices; ++s) arch::wgmma_touch(acc.v[s]);
  arch::wgmma_fence();
}
__device__ __forceinline__ void mma_commit() { arch::wgmma_commit(); }
// Wait until at most PENDING groups are in flight, then touch the accumulators of the retired
// groups (one wait covers several tiles) so the compiler reads them only after the wait.
template <int R, int N> __device__ __forceinline__ void mma_touch(rt<float, R, N>& acc) {
#pragma unroll
  for (int s = 0; s < acc.slices; ++s) arch::wgmma_touch(acc.v[s]);
}
template <int PENDING, typename... Accs> __device__ __forceinline__ void mma_wait(Accs&... accs) {
  arch::wgmma_wait<PENDING>();
  (mma_touch(accs), ...);
}

template <typename T, int R, int N, int RA, int K, int SWA, int SWB>
__device__ __forceinline__ void mma_AB(rt<float, R, N>& acc, const st<T, RA, K, SWA>& a, int a_row0,
                                       const st<T, K, N, SWB>& b, bool accumulate = true) {
  static_assert(N <= 256 && K % 16 == 0, "one wgmma covers N <= 256; K steps of 16");
  mma_fence(acc);
#pragma unroll
  for (int k = 0; k < K / 16; ++k)
#pragma unroll
    for (int s = 0; s < acc.slices; ++s)
      arch::wgmma_ss<N, T, 0, 1>::run(acc.v[s], desc_kmajor(a, a_row0 + 64 * s, k), desc_mnmajor(b, k),
                                      (accumulate || k > 0) ? 1 : 0);
}
// (8-bit inputs take this form only: fp8 wgmma reads both operands K-major, 32 K per instruction.)
template <typename T, int R, int N, int RA, int K, int SWA, int SWB>
__device__ __forceinline__ void mma_ABt(rt<float, R, N>& acc, const st<T, RA, K, SWA>& a, int a_row0,
                                        const st<T, N, K, SWB>& b, bool accumulate = true) {
  constexpr int KSTEP = 32 / int(sizeof(T));  // K per wgmma: 16 for 16-bit inputs, 32 for 8-bit
  static_assert(N <= 256 && K % KSTEP == 0, "one wgmma covers N <= 256; K steps of 32 bytes");
  mma_fence(acc);
#pragma unroll
  for (int k = 0; k < K / KSTEP; ++k)
#pragma unroll
    for (int s = 0; s < acc.slices; ++s)
      arch::wgmma_ss<N, T, 0, 0>::run(acc.v[s], desc_kmajor(a, a_row0 + 64 * s, k), desc_kmajor(b, 0, k),
                                      (accumulate || k > 0) ? 1 : 0);
}
// A given K x M (MN-major: wgmma's transpose bit for A): acc's rows are columns a_col0 .. a_col0 + R
// of `a` (whole 64-column chunks of its swizzled layout). B as in mma_AB (TB = 1) / mma_ABt (TB = 0).
// KP > 0 sums over rows k0 .. k0 + KP of K only (k0 a multiple of 16): mma_AtB_slice.
template <int TB, int KP = 0, typename T, int R, int N, int K, int MA, int SWA, class SB>
__device__ __forceinline__ void mma_At(rt<float, R, N>& acc, const st<T, K, MA, SWA>& a, int a_col0, const SB& b,
                                       bool accumulate, int k0 = 0) {
  constexpr int KS = (KP ? KP : K) / 16;  // wgmma K steps
  static_assert(N <= 256 && K % 16 == 0 && KP % 16 == 0 && KP <= K && MA % 64 == 0,
                "one wgmma covers N <= 256; K steps of 16");
  // accumulate = false: the old values are dead; zeroing them ends their live range here (the wgmma's
  // read-write operands would otherwise carry whatever the registers held into it)
  if (!accumulate) fill(acc, 0.f);
  mma_fence(acc);
#pragma unroll
  for (int k = 0; k < KS; ++k)
#pragma unroll
    for (int s = 0; s < acc.slices; ++s)
      arch::wgmma_ss<N, T, 1, TB>::run(acc.v[s], desc_mnmajor(a, k0 / 16 + k, a_col0 / 64 + s),
                                       TB ? desc_mnmajor(b, k0 / 16 + k) : desc_kmajor(b, 0, k0 / 16 + k),
                                       (accumulate || k > 0) ? 1 : 0);
}
template <typename T, int R, int N, int K, int MA, int SWA, int SWB>
__device__ __forceinline__ void mma_AtB(rt<float, R, N>& acc, const st<T, K, MA, SWA>& a, int a_col0,
                                        const st<T, K, N, SWB>& b, bool accumulate = true) {
  mma_At<1>(acc, a, a_col0, b, accumulate);
}
// A K-slice of mma_AtB: rows k0 .. k0 + KP of `a` (K x M) and `b` (K x N), acc's rows the columns 0 .. R
// of `a`. Each consumer warpgroup takes its own slice of a sum over K (its rows of a tile they split)
// and adds its partial product into global memory; k0 is a multiple of 16.
template <int KP, typename T, int R, int N, int K, int MA, int SWA, int SWB>
__device__ __forceinline__ void mma_AtB_slice(rt<float, R, N>& acc, const st<T, K, MA, SWA>& a,
                                              const st<T, K, N, SWB>& b, int k0, bool accumulate = true) {
  mma_At<1, KP>(acc, a, 0, b, accumulate, k0);
}
template <typename T, int R, int N, int K, int MA, int SWA, int SWB>
__device__ __forceinline__ void mma_AtBt(rt<float, R, N>& acc, const st<T, K, MA, SWA>& a, int a_col0,
                                         const st<T, N, K, SWB>& b, bool accumulate = true) {
  mma_At<0>(acc, a, a_col0, b, accumulate);
}
template <typename T, int R, int N, int K, int SWB>
__device__ __forceinline__ void mma_AB(rt<float, R, N>& acc, const rt<T, R, K>& a, const st<T, K, N, SWB>& b,
                                       bool accumulate = true) {
  static_assert(N <= 256 && K % 16 == 0, "one wgmma covers N <= 256; K steps of 16");
  mma_fence(acc);
#pragma unroll
  for (int k = 0; k < K / 16; ++k)
#pragma unroll
    for (int s = 0; s < acc.slices; ++s)
      arch::wgmma_rs<N, T, 1>::run(acc.v[s], reinterpret_cast<const u32(&)[4]>(a.v[s][4 * k]), desc_mnmajor(b, k),
                                   (accumulate || k > 0) ? 1 : 0);
}
template <typename T, int R, int N, int K, int SWB>
__device__ __forceinline__ void mma_ABt(rt<float, R, N>& acc, const rt<T, R, K>& a, const st<T, N, K, SWB>& b,
                                        bool accumulate = true) {
  static_assert(N <= 256 && K % 16 == 0, "one wgmma covers N <= 256; K steps of 16");
  mma_fence(acc);
#pragma unroll
  for (int k = 0; k < K / 16; ++k)
#pragma unroll
    for (int s = 0; s < acc.slices; ++s)
      arch::wgmma_rs<N, T, 0>::run(acc.v[s], reinterpret_cast<const u32(&)[4]>(a.v[s][4 * k]), desc_kmajor(b, 0, k),
                                   (accumulate || k > 0) ? 1 : 0);
}

}  // namespace tiles
