// tiles CDNA bulk ops on register tiles: the OPS.md vocabulary (zero, fill, elementwise, row/col
// reductions, row/col broadcasts, masks, safe division). Destination first, like the IR.
// All loops are over compile-time shapes and unroll; coordinates come from rt.h's layout functions.
#pragma once
#include "rt.h"

namespace tiles {

// ------------------------------------------------------------------ element-wise core
// f(value, row, col) -> value, for every element the lane holds (row, col relative to the tile).
template <class T, class F>
TILES_DEV void map_rc(T& d, const T& s, F f) {
  const int lane = (int)arch::lane_id();
#pragma unroll
  for (int i = 0; i < T::rb; ++i)
#pragma unroll
    for (int j = 0; j < T::cb; ++j)
#pragma unroll
      for (int r = 0; r < T::nreg; ++r) d.d[i][j][r] = f(s.d[i][j][r], T::row_of(lane, i, r), T::col_of(lane, j));
}
template <class T, class F>
TILES_DEV void map(T& d, const T& s, F f) {
#pragma unroll
  for (int i = 0; i < T::rb; ++i)
#pragma unroll
    for (int j = 0; j < T::cb; ++j)
#pragma unroll
      for (int r = 0; r < T::nreg; ++r) d.d[i][j][r] = f(s.d[i][j][r]);
}
template <class T, class F>
TILES_DEV void map2(T& d, const T& a, const T& b, F f) {
#pragma unroll
  for (int i = 0; i < T::rb; ++i)
#pragma unroll
    for (int j = 0; j < T::cb; ++j)
#pragma unroll
      for (int r = 0; r < T::nreg; ++r) d.d[i][j][r] = f(a.d[i][j][r], b.d[i][j][r]);
}

template <class T> TILES_DEV void fill(T& d, float v) { map(d, d, [=](float) { return v; }); }
template <class T> TILES_DEV void zero(T& d) { fill(d, 0.0f); }
template <class T> TILES_DEV void copy(T& d, const T& s) { map(d, s, [](float x) { return x; }); }
template <class T> TILES_DEV void neg(T& d, const T& s) { map(d, s, [](float x) { return -x; }); }
template <class T> TILES_DEV void abs(T& d, const T& s) { map(d, s, [](float x) { return __builtin_fabsf(x); }); }
template <class T> TILES_DEV void exp2(T& d, const T& s) { map(d, s, [](float x) { return arch::exp2(x); }); }
template <class T> TILES_DEV void exp(T& d, const T& s) { map(d, s, [](float x) { return arch::exp2(x * 1.4426950408889634f); }); }
template <class T> TILES_DEV void log2(T& d, const T& s) { map(d, s, [](float x) { return arch::log2(x); }); }
template <class T> TILES_DEV void log(T& d, const T& s) { map(d, s, [](float x) { return arch::log2(x) * 0.6931471805599453f; }); }
template <class T> TILES_DEV void rsqrt(T& d, const T& s) { map(d, s, [](float x) { return arch::rsqrt(x); }); }

// safe division: x / 0 -> 0 (fully masked attention rows give zeros, never NaN)
TILES_DEV float safe_div(float x, float y) { return y == 0.0f ? 0.0f : x / y; }
TILES_DEV float fmaxf_(float a, float b) { return __builtin_fmaxf(a, b); }
TILES_DEV float fminf_(float a, float b) { return __builtin_fminf(a, b); }

#define TILES_BINARY(NAME, EXPR)                                                                        \
  template <class T> TILES_DEV void NAME(T& d, const T& a, const T& b) { map2(d, a, b, [](float x, float y) { return EXPR; }); } \
  template <class T> TILES_DEV void NAME(T& d, const T& a, float y) { map(d, a, [=](float x) { return EXPR; }); }
TILES_BINARY(add, x + y)
TILES_BINARY(sub, x - y)
TILES_BINARY(mul, x * y)
TILES_BINARY(div, x / y)
TILES_BINARY(max, fmaxf_(x, y))
TILES_BINARY(min, fminf_(x, y))
#undef TILES_BINARY

// ------------------------------------------------------------------ broadcasts
#define TILES_BCAST(NAME, EXPR)                                                                          \
  template <int R, int C, int MF> TILES_DEV void NAME##_row(rt_acc<R, C, MF>& d, const rt_acc<R, C, MF>& t, const rv_row<R, MF>& v) { \
    _Pragma("unroll") for (int i = 0; i < R / MF; ++i) _Pragma("unroll") for (int j = 0; j < C / MF; ++j)         \
      _Pragma("unroll") for (int r = 0; r < rt_acc<R, C, MF>::nreg; ++r) {                                  \
        float x = t.d[i][j][r], y = v.v[i][r]; d.d[i][j][r] = EXPR; } }                                       \
  template <int R, int C, int MF> TILES_DEV void NAME##_col(rt_acc<R, C, MF>& d, const rt_acc<R, C, MF>& t, const rv_col<C, MF>& v) { \
    _Pragma("unroll") for (int i = 0; i < R / MF; ++i) _Pragma("unroll") for (int j = 0; j < C / MF; ++j)         \
      _Pragma("unroll") for (int r = 0; r < rt_acc<R, C, MF>::nreg; ++r) {                                  \
        float x = t.d[i][j][r], y = v.v[j]; d.d[i][j][r] = EXPR; } }
TILES_BCAST(add, x + y)
TILES_BCAST(sub, x - y)
TILES_BCAST(mul, x * y)
TILES_BCAST(div, safe_div(x, y))
#undef TILES_BCAST

// ------------------------------------------------------------------ reductions
struct op_max { TILES_DEV float init() { return -__builtin_inff(); } TILES_DEV float f(float a, float b) { return fmaxf_(a, b); } };
struct op_sum { TILES_DEV float init() { return 0.0f; } TILES_DEV float f(float a, float b) { return a + b; } };

// reduce across the lanes that share (l / MF): the MF columns of one base (xor 1 .. MF/2)
template <class OP, int MF> TILES_DEV float reduce_cols_of_base(float x) {
  x = OP::f(x, arch::shfl_xor<1>(x));
  x = OP::f(x, arch::shfl_xor<2>(x));
  x = OP::f(x, arch::shfl_xor<4>(x));
  x = OP::f(x, arch::shfl_xor<8>(x));
  if constexpr (MF == 32) x = OP::f(x, arch::shfl_xor<16>(x));
  return x;
}
// reduce across the lane groups that hold different rows of the same column (xor MF .. 32)
template <class OP, int MF> TILES_DEV float reduce_rows_of_base(float x) {
  if constexpr (MF == 16) x = OP::f(x, arch::shfl_xor<16>(x));
  return OP::f(x, arch::shfl_xor<32>(x));
}

// v[row] = reduce over columns of t[row][:] (combined with init if given)
template <class OP, int R, int C, int MF>
TILES_DEV void row_reduce(rv_row<R, MF>& v, const rt_acc<R, C, MF>& t, const rv_row<R, MF>* init) {
#pragma unroll
  for (int i = 0; i < R / MF; ++i)
#pragma unroll
    for (int r = 0; r < rt_acc<R, C, MF>::nreg; ++r) {
      float x = t.d[i][0][r];
#pragma unroll
      for (int j = 1; j < C / MF; ++j) x = OP::f(x, t.d[i][j][r]);
      x = reduce_cols_of_base<OP, MF>(x);
      v.v[i][r] = init ? OP::f(init->v[i][r], x) : x;
    }
}
// v[col] = reduce over rows of t[:][col]
template <class OP, int R, int C, int MF>
TILES_DEV void col_reduce(rv_col<C, MF>& v, const rt_acc<R, C, MF>& t, const rv_col<C, MF>* init) {
#pragma unroll
  for (int j = 0; j < C / MF; ++j) {
    float x = OP::init();
#pragma unroll
    for (int i = 0; i < R / MF; ++i)
#pragma unroll
      for (int r = 0; r < rt_acc<R, C, MF>::nreg; ++r) x = OP::f(x, t.d[i][j][r]);
    x = reduce_rows_of_base<OP, MF>(x);
    v.v[j] = init ? OP::f(init->v[j], x) : x;
  }
}
template <int R, int C, int MF> TILES_DEV void row_max(rv_row<R, MF>& v, const rt_acc<R, C, MF>& t, const rv_row<R, MF>* init = nullptr) { row_reduce<op_max>(v, t, init); }
template <int R, int C, int MF> TILES_DEV void row_sum(rv_row<R, MF>& v, const rt_acc<R, C, MF>& t, const rv_row<R, MF>* init = nullptr) { row_reduce<op_sum>(v, t, init); }
template <int R, int C, int MF> TILES_DEV void col_max(rv_col<C, MF>& v, const rt_acc<R, C, MF>& t, const rv_col<C, MF>* init = nullptr) { col_reduce<op_max>(v, t, init); }
template <int R, int C, int MF> TILES_DEV void col_sum(rv_col<C, MF>& v, const rt_acc<R, C, MF>& t, const rv_col<C, MF>* init = nullptr) { col_reduce<op_sum>(v, t, init); }


// ------------------------------------------------------------------ vectors (rv_col, rv_lane)
// Element-wise ops on per-column vectors (rv_col: one value per column the lane holds, e.g. the per-query
// running max / sum of attention's S^T) and lane-spread per-row vectors (rv_lane, e.g. the per-query LSE /
// Delta of attention backward's dK/dV tiles, rt.h rt_rp, whose queries sit in registers).
template <int C, int MF, class F> TILES_DEV void vmap(rv_col<C, MF>& d, const rv_col<C, MF>& s, F f) {
#pragma unroll
  for (int j = 0; j < C / MF; ++j) d.v[j] = f(s.v[j]);
}
template <int C, int MF, class F> TILES_DEV void vmap2(rv_col<C, MF>& d, const rv_col<C, MF>& a, const rv_col<C, MF>& b, F f) {
#pragma unroll
  for (int j = 0; j < C / MF; ++j) d.v[j] = f(a.v[j], b.v[j]);
}
template <int R, int MF, class F> TILES_DEV void vmap(rv_lane<R, MF>& d, const rv_lane<R, MF>& s, F f) {
#pragma unroll
  for (int j = 0; j < rv_lane<R, MF>::n; ++j) d.v[j] = f(s.v[j]);
}
template <int R, int MF, class F> TILES_DEV void vmap2(rv_lane<R, MF>& d, const rv_lane<R, MF>& a, const rv_lane<R, MF>& b, F f) {
#pragma unroll
  for (int j = 0; j < rv_lane<R, MF>::n; ++j) d.v[j] = f(a.v[j], b.v[j]);
}
#define TILES_VOPS(VEC)                                                                                                   \
  template <int N, int MF> TILES_DEV void fill(VEC<N, MF>& d, float v) { vmap(d, d, [=](float) { return v; }); }         \
  template <int N, int MF> TILES_DEV void zero(VEC<N, MF>& d) { fill(d, 0.0f); }                                       \
  template <int N, int MF> TILES_DEV void copy(VEC<N, MF>& d, const VEC<N, MF>& s) { vmap(d, s, [](float x) { return x; }); } \
  template <int N, int MF> TILES_DEV void exp2(VEC<N, MF>& d, const VEC<N, MF>& s) { vmap(d, s, [](float x) { return arch::exp2(x); }); } \
  template <int N, int MF> TILES_DEV void log2(VEC<N, MF>& d, const VEC<N, MF>& s) { vmap(d, s, [](float x) { return arch::log2(x); }); } \
  template <int N, int MF> TILES_DEV void neg(VEC<N, MF>& d, const VEC<N, MF>& s) { vmap(d, s, [](float x) { return -x; }); } \
  TILES_VBINARY(VEC, add, x + y)                                                                                        \
  TILES_VBINARY(VEC, sub, x - y)                                                                                        \
  TILES_VBINARY(VEC, mul, x * y)                                                                                        \
  TILES_VBINARY(VEC, div, x / y)                                                                                        \
  TILES_VBINARY(VEC, max, fmaxf_(x, y))                                                                                 \
  TILES_VBINARY(VEC, min, fminf_(x, y))
#define TILES_VBINARY(VEC, NAME, EXPR)                                                                                    \
  template <int N, int MF> TILES_DEV void NAME(VEC<N, MF>& d, const VEC<N, MF>& a, const VEC<N, MF>& b) {               \
    vmap2(d, a, b, [](float x, float y) { return EXPR; }); }                                                            \
  template <int N, int MF> TILES_DEV void NAME(VEC<N, MF>& d, const VEC<N, MF>& a, float y) {                           \
    vmap(d, a, [=](float x) { return EXPR; }); }
TILES_VOPS(rv_col)
TILES_VOPS(rv_lane)
#undef TILES_VOPS
#undef TILES_VBINARY
template <int CMP, int C, int MF> TILES_DEV void fill_where(rv_col<C, MF>& d, const rv_col<C, MF>& ref, float rhs, float value) {
  vmap2(d, ref, d, [=](float x, float y) {
    bool p = CMP == 0 ? x == rhs : CMP == 1 ? x != rhs : CMP == 2 ? x < rhs : CMP == 3 ? x <= rhs : CMP == 4 ? x > rhs : x >= rhs;
    return p ? value : y;
  });
}

// ------------------------------------------------------------------ transposed tiles (rt.h rt_t): the logical view
// A logical row is an acc column, so the logical row ops are the accumulator's column ops, and a logical
// per-row vector is an rv_col of the accumulator (one value per lane, its query).
template <int R, int C, int MF, bool P>
TILES_DEV void row_max(rv_col<R, MF>& v, const rt_t<R, C, MF, P>& t, const rv_col<R, MF>* init = nullptr) { col_reduce<op_max>(v, t, init); }
template <int R, int C, int MF, bool P>
TILES_DEV void row_sum(rv_col<R, MF>& v, const rt_t<R, C, MF, P>& t, const rv_col<R, MF>* init = nullptr) { col_reduce<op_sum>(v, t, init); }
#define TILES_TBCAST(NAME)                                                                                                \
  template <int R, int C, int MF, bool P>                                                                                 \
  TILES_DEV void NAME##_row(rt_t<R, C, MF, P>& d, const rt_t<R, C, MF, P>& t, const rv_col<R, MF>& v) { NAME##_col(d, t, v); }
TILES_TBCAST(add)
TILES_TBCAST(sub)
TILES_TBCAST(mul)
TILES_TBCAST(div)
#undef TILES_TBCAST
// row broadcasts of a lane-spread vector over a row-permuted tile (rt.h rt_rp): register (i, r) holds
// logical row key_perm(i*MF + ..), a row of the same 64-row group for every lane: one shfl per register
#define TILES_LBCAST(NAME, EXPR)                                                                                          \
  template <int R, int C, int MF>                                                                                         \
  TILES_DEV void NAME##_row(rt_rp<R, C, MF>& d, const rt_rp<R, C, MF>& t, const rv_lane<R, MF>& v) {                    \
    typedef rt_rp<R, C, MF> T;                                                                                            \
    const int lane = (int)arch::lane_id();                                                                                \
    _Pragma("unroll") for (int i = 0; i < T::rb; ++i) _Pragma("unroll") for (int r = 0; r < T::nreg; ++r) {               \
      const float y = arch::shfl(v.v[i * MF / 64], (u32)(T::row_of(lane, i, r) % 64));                                    \
      _Pragma("unroll") for (int j = 0; j < T::cb; ++j) { const float x = t.d[i][j][r]; d.d[i][j][r] = EXPR; } } }
TILES_LBCAST(add, x + y)
TILES_LBCAST(sub, x - y)
TILES_LBCAST(mul, x * y)
TILES_LBCAST(div, safe_div(x, y))
#undef TILES_LBCAST
// f(value, logical row, logical col) for every element the lane holds
template <int R, int C, int MF, bool P, class F>
TILES_DEV void map_rc(rt_t<R, C, MF, P>& d, const rt_t<R, C, MF, P>& s, F f) {
  typedef rt_t<R, C, MF, P> T;
  const int lane = (int)arch::lane_id();
#pragma unroll
  for (int i = 0; i < T::rb; ++i)
#pragma unroll
    for (int j = 0; j < T::cb; ++j)
#pragma unroll
      for (int r = 0; r < T::nreg; ++r) d.d[i][j][r] = f(s.d[i][j][r], T::lrow_of(lane, j), T::lcol_of(lane, i, r));
}

// ------------------------------------------------------------------ masks (row0/col0: the tile's origin)
template <class T> TILES_DEV void mask_causal(T& t, int row0, int col0, int offset, float value) {
  map_rc(t, t, [=](float x, int r, int c) { return col0 + c > row0 + r + offset ? value : x; });
}
// a sliding window's left edge: value where col0 + c < row0 + r + offset
template <class T> TILES_DEV void mask_window(T& t, int row0, int col0, int offset, float value) {
  map_rc(t, t, [=](float x, int r, int c) { return col0 + c < row0 + r + offset ? value : x; });
}
template <class T> TILES_DEV void mask_cols(T& t, int col0, int limit, float value) {
  map_rc(t, t, [=](float x, int, int c) { return col0 + c >= limit ? value : x; });
}
template <class T> TILES_DEV void mask_rows(T& t, int row0, int limit, float value) {
  map_rc(t, t, [=](float x, int r, int) { return row0 + r >= limit ? value : x; });
}
// d[i] = value where (ref[i] CMP rhs), CMP: 0 ==, 1 !=, 2 <, 3 <=, 4 >, 5 >=
template <int CMP, class T> TILES_DEV void fill_where(T& d, const T& ref, float rhs, float value) {
  map2(d, ref, d, [=](float x, float y) {
    bool p = CMP == 0 ? x == rhs : CMP == 1 ? x != rhs : CMP == 2 ? x < rhs : CMP == 3 ? x <= rhs : CMP == 4 ? x > rhs : x >= rhs;
    return p ? value : y;
  });
}

}  // namespace tiles
