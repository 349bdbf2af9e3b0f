// tiles/simt.h — register tiles without tensor cores: what the generic Hopper lowering (lower_simt.py)
// calls for kernels that use no mma (layernorm, rotary, the attention backward's row term, and any
// kernel of the user's built from the same ops).
//
// Layout. A block of L::threads threads is a TR x TC grid of threads: thread t sits on thread-row
// t / TC and thread-column t % TC, so the lanes of one tile row are consecutive (a row is a part of a
// warp when TC <= 32, or TC / 32 whole warps). A tile (R, C) is cut into chunks of V consecutive
// columns (V = 16 bytes of bf16 where C allows it); thread (tr, tc) holds
//     rows   r = tr + i * TR                    for i < NI = cdiv(R, TR)
//     chunks c = (j * TC + tc) * V + e         for j < NJ = cdiv(C, TC * V), e < V
// as one flat float array v[(i * NJ + j) * V + e]. A row vector (one value per tile row) holds v[i]
// for the same rows, replicated on the TC threads of the row; a column vector holds v[j * V + e] for
// the same columns, replicated on the TR thread-rows. Everything is f32 in registers; an op's result
// is rounded to its destination's dtype (round_to<D>), as the reference interpreter does.
//
// Global windows are (pointer, in-range flag, dims, 64-bit strides). A chunk moves as 16-byte
// vectors when the column stride is 1, the chunk is in range and its address aligned; otherwise one
// bounds-checked element at a time (out-of-range reads give 0, out-of-range writes are dropped).
#pragma once
#include "arch.h"

namespace tiles {
namespace simt {

typedef long long i64;

#ifndef INFINITY  // the IR's float constants are spelled INFINITY / -INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

__host__ __device__ constexpr int cdiv(int a, int b) { return b ? (a + b - 1) / b : 0; }
__host__ __device__ constexpr int imin(int a, int b) { return a < b ? a : b; }

// Chunk width for a C-column tile on TC thread-columns: the largest power of two <= vmax that
// divides C and still gives every thread-column a chunk (at least 1).
__host__ __device__ constexpr int chunk_width(int C, int TC, int vmax) {
  return (vmax > 1 && (C % vmax != 0 || vmax * TC > C)) ? chunk_width(C, TC, vmax / 2) : (vmax < 1 ? 1 : vmax);
}

template <int TR_, int TC_, int VMAX_> struct layout {
  static constexpr int TR = TR_, TC = TC_, VMAX = VMAX_, threads = TR_ * TC_;
  static_assert(threads % 32 == 0, "a block is whole warps");
  static_assert(TC <= 32 ? 32 % TC == 0 : TC % 32 == 0, "a tile row is part of one warp or whole warps");
  __device__ static int tr() { return threadIdx.x / TC; }
  __device__ static int tc() { return threadIdx.x % TC; }
};

template <int R_, int C_, class L> struct tile {
  static constexpr int R = R_, C = C_, V = chunk_width(C_, L::TC, L::VMAX);
  static constexpr int NI = cdiv(R_, L::TR), NJ = cdiv(C_, L::TC * V), N = NI * NJ * V;
  float v[N];
  __device__ static int row(int i) { return L::tr() + i * L::TR; }
  __device__ static int col(int j, int e = 0) { return (j * L::TC + L::tc()) * V + e; }
  __device__ static bool row_ok(int i) { return R % L::TR == 0 || row(i) < R; }
  __device__ static bool chunk_ok(int j) { return C % (L::TC * V) == 0 || col(j) < C; }
};

template <int R_, class L> struct rvec {  // one value per tile row
  static constexpr int R = R_, NI = cdiv(R_, L::TR), N = NI;
  float v[N];
  __device__ static int row(int i) { return L::tr() + i * L::TR; }
  __device__ static bool row_ok(int i) { return R % L::TR == 0 || row(i) < R; }
};

template <int C_, class L> struct cvec {  // one value per tile column
  static constexpr int C = C_, V = chunk_width(C_, L::TC, L::VMAX);
  static constexpr int NJ = cdiv(C_, L::TC * V), N = NJ * V;
  float v[N];
  __device__ static int col(int j, int e = 0) { return (j * L::TC + L::tc()) * V + e; }
  __device__ static bool chunk_ok(int j) { return C % (L::TC * V) == 0 || col(j) < C; }
};

// ---------------------------------------------------------------- numbers
// Element types: float, bf16, f16 (arch.h) and int for i32.
template <class T> __device__ __forceinline__ float to_f(T x) { return arch::to_float(x); }
__device__ __forceinline__ float to_f(int x) { return float(x); }
template <class T> __device__ __forceinline__ T from_f(float x) { return arch::from_float<T>(x); }
template <> __device__ __forceinline__ int from_f<int>(float x) { return int(x); }
template <class D> __device__ __forceinline__ float round_to(float x) { return to_f(from_f<D>(x)); }
template <> __device__ __forceinline__ float round_to<float>(float x) { return x; }

// ---------------------------------------------------------------- elementwise functions
struct add { __device__ float operator()(float a, float b) const { return a + b; } };
struct sub { __device__ float operator()(float a, float b) const { return a - b; } };
struct mul { __device__ float operator()(float a, float b) const { return a * b; } };
struct div { __device__ float operator()(float a, float b) const { return a / b; } };
struct safe_div { __device__ float operator()(float a, float b) const { return b == 0.0f ? 0.0f : a / b; } };
struct max { __device__ float operator()(float a, float b) const { return fmaxf(a, b); } };
struct min { __device__ float operator()(float a, float b) const { return fminf(a, b); } };
struct exp { __device__ float operator()(float a) const { return expf(a); } };
struct exp2 { __device__ float operator()(float a) const { return exp2f(a); } };
struct log { __device__ float operator()(float a) const { return logf(a); } };
struct log2 { __device__ float operator()(float a) const { return log2f(a); } };
struct neg { __device__ float operator()(float a) const { return -a; } };
struct abs { __device__ float operator()(float a) const { return fabsf(a); } };
struct rsqrt { __device__ float operator()(float a) const { return 1.0f / sqrtf(a); } };
struct copy { __device__ float operator()(float a) const { return a; } };

struct eq { __device__ bool operator()(float a, float b) const { return a == b; } };
struct ne { __device__ bool operator()(float a, float b) const { return a != b; } };
struct lt { __device__ bool operator()(float a, float b) const { return a < b; } };
struct le { __device__ bool operator()(float a, float b) const { return a <= b; } };
struct gt { __device__ bool operator()(float a, float b) const { return a > b; } };
struct ge { __device__ bool operator()(float a, float b) const { return a >= b; } };

struct sum_op {
  __device__ static float identity() { return 0.0f; }
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct max_op {
  __device__ static float identity() { return __int_as_float(0xff800000u); }  // -inf
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// d = f(a) and d = f(a, b), b a fragment of the same shape or a scalar, for tiles and vectors alike.
template <class D, class X, class F> __device__ __forceinline__ void unary(X& d, const X& a, F f) {
#pragma unroll
  for (int k = 0; k < X::N; ++k) d.v[k] = round_to<D>(f(a.v[k]));
}
template <class D, class X, class F> __device__ __forceinline__ void binary(X& d, const X& a, const X& b, F f) {
#pragma unroll
  for (int k = 0; k < X::N; ++k) d.v[k] = round_to<D>(f(a.v[k], b.v[k]));
}
template <class D, class X, class F> __device__ __forceinline__ void binary(X& d, const X& a, float b, F f) {
#pragma unroll
  for (int k = 0; k < X::N; ++k) d.v[k] = round_to<D>(f(a.v[k], b));
}
template <class D, class X> __device__ __forceinline__ void fill(X& d, float value) {
  const float x = round_to<D>(value);
#pragma unroll
  for (int k = 0; k < X::N; ++k) d.v[k] = x;
}

// d[r, c] = f(t[r, c], v[r]) and f(t[r, c], v[c]).
template <class D, int R, int C, class L, class F>
__device__ __forceinline__ void bcast_row(tile<R, C, L>& d, const tile<R, C, L>& t, const rvec<R, L>& v, F f) {
  typedef tile<R, C, L> T;
#pragma unroll
  for (int i = 0; i < T::NI; ++i)
#pragma unroll
    for (int k = 0; k < T::NJ * T::V; ++k) d.v[i * T::NJ * T::V + k] = round_to<D>(f(t.v[i * T::NJ * T::V + k], v.v[i]));
}
template <class D, int R, int C, class L, class F>
__device__ __forceinline__ void bcast_col(tile<R, C, L>& d, const tile<R, C, L>& t, const cvec<C, L>& v, F f) {
  typedef tile<R, C, L> T;
#pragma unroll
  for (int i = 0; i < T::NI; ++i)
#pragma unroll
    for (int k = 0; k < T::NJ * T::V; ++k) d.v[i * T::NJ * T::V + k] = round_to<D>(f(t.v[i * T::NJ * T::V + k], v.v[k]));
}

// ---------------------------------------------------------------- masks
// t[r, c] = value (rounded to D) where masked(r, c), over the tile's own row and column offsets
template <class D, int R, int C, class L, class P>
__device__ __forceinline__ void mask_where(tile<R, C, L>& t, float value, P masked) {
  typedef tile<R, C, L> T;
  const float x = round_to<D>(value);
#pragma unroll
  for (int i = 0; i < T::NI; ++i)
#pragma unroll
    for (int j = 0; j < T::NJ; ++j)
#pragma unroll
      for (int e = 0; e < T::V; ++e)
        if (masked(T::row(i), T::col(j, e))) t.v[(i * T::NJ + j) * T::V + e] = x;
}
template <class D, int R, int C, class L>
__device__ __forceinline__ void mask_causal(tile<R, C, L>& t, int row0, int col0, int offset, float value) {
  mask_where<D>(t, value, [=](int r, int c) { return col0 + c > row0 + r + offset; });
}
template <class D, int R, int C, class L>
__device__ __forceinline__ void mask_window(tile<R, C, L>& t, int row0, int col0, int offset, float value) {
  mask_where<D>(t, value, [=](int r, int c) { return col0 + c < row0 + r + offset; });
}
template <class D, int R, int C, class L>
__device__ __forceinline__ void mask_cols(tile<R, C, L>& t, int col0, int limit, float value) {
  mask_where<D>(t, value, [=](int, int c) { return col0 + c >= limit; });
}
template <class D, int R, int C, class L>
__device__ __forceinline__ void mask_rows(tile<R, C, L>& t, int row0, int limit, float value) {
  typedef tile<R, C, L> T;
  const float x = round_to<D>(value);
#pragma unroll
  for (int i = 0; i < T::NI; ++i)
    if (row0 + T::row(i) >= limit)
#pragma unroll
      for (int k = 0; k < T::NJ * T::V; ++k) t.v[i * T::NJ * T::V + k] = x;
}
template <class D, int R, class L>
__device__ __forceinline__ void mask_rows(rvec<R, L>& t, int row0, int limit, float value) {
  const float x = round_to<D>(value);
#pragma unroll
  for (int i = 0; i < rvec<R, L>::NI; ++i)
    if (row0 + rvec<R, L>::row(i) >= limit) t.v[i] = x;
}
template <class D, int C, class L>  // a column vector's only index is its column
__device__ __forceinline__ void mask_rows(cvec<C, L>& t, int row0, int limit, float value) {
  typedef cvec<C, L> T;
  const float x = round_to<D>(value);
#pragma unroll
  for (int j = 0; j < T::NJ; ++j)
#pragma unroll
    for (int e = 0; e < T::V; ++e)
      if (row0 + T::col(j, e) >= limit) t.v[j * T::V + e] = x;
}
template <class D, class X, class Cmp>
__device__ __forceinline__ void fill_where(X& d, const X& ref, Cmp cmp, float rhs, float value) {
  const float x = round_to<D>(value);
#pragma unroll
  for (int k = 0; k < X::N; ++k)
    if (cmp(ref.v[k], rhs)) d.v[k] = x;
}

// ---------------------------------------------------------------- reductions
// Row reductions: each thread over its chunks, then the lanes of the row (shuffles), then — when a row
// spans TC / 32 warps — the warps of the row through `scratch` (TR * NI * TC / 32 floats; two
// __syncthreads). Every thread of the row ends with the same value.
template <class D, int R, int C, class L, class Op>
__device__ __forceinline__ void row_reduce(rvec<R, L>& d, const tile<R, C, L>& t, Op op, float* scratch,
                                           const rvec<R, L>* init = nullptr) {
  typedef tile<R, C, L> T;
  float s[T::NI];
#pragma unroll
  for (int i = 0; i < T::NI; ++i) {
    float acc = Op::identity();
#pragma unroll
    for (int j = 0; j < T::NJ; ++j)
      if (T::chunk_ok(j))
#pragma unroll
        for (int e = 0; e < T::V; ++e) acc = op(acc, t.v[(i * T::NJ + j) * T::V + e]);
    s[i] = acc;
  }
#pragma unroll
  for (int m = 1; m < imin(L::TC, 32); m <<= 1)
#pragma unroll
    for (int i = 0; i < T::NI; ++i) s[i] = op(s[i], arch::shfl_xor(s[i], m));
  if constexpr (L::TC > 32) {
    constexpr int W = L::TC / 32;
    const int tr = L::tr(), w = L::tc() / 32;
    __syncthreads();  // the previous user of scratch is done
    if (arch::lane_id() == 0)
#pragma unroll
      for (int i = 0; i < T::NI; ++i) scratch[(i * L::TR + tr) * W + w] = s[i];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < T::NI; ++i) {
      float acc = scratch[(i * L::TR + tr) * W];
#pragma unroll
      for (int k = 1; k < W; ++k) acc = op(acc, scratch[(i * L::TR + tr) * W + k]);
      s[i] = acc;
    }
  }
#pragma unroll
  for (int i = 0; i < T::NI; ++i) d.v[i] = round_to<D>(init ? op(s[i], init->v[i]) : s[i]);
}

// Column reductions: each thread over its rows, then the thread-rows that share a warp (shuffles),
// then the warps through `scratch` (G * TC * V * NJ floats, G = warps holding the same columns).
template <class D, int R, int C, class L, class Op>
__device__ __forceinline__ void col_reduce(cvec<C, L>& d, const tile<R, C, L>& t, Op op, float* scratch,
                                           const cvec<C, L>* init = nullptr) {
  typedef tile<R, C, L> T;
  constexpr int K = T::NJ * T::V, CP = T::NJ * L::TC * T::V;
  float s[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    float acc = Op::identity();
#pragma unroll
    for (int i = 0; i < T::NI; ++i)
      if (T::row_ok(i)) acc = op(acc, t.v[i * K + k]);
    s[k] = acc;
  }
#pragma unroll
  for (int m = L::TC; m < 32; m <<= 1)
#pragma unroll
    for (int k = 0; k < K; ++k) s[k] = op(s[k], arch::shfl_xor(s[k], m));
  constexpr int G = L::TC >= 32 ? L::TR : L::threads / 32;
  if constexpr (G > 1) {
    const int g = L::TC >= 32 ? L::tr() : int(threadIdx.x / 32);
    __syncthreads();
    if (L::TC >= 32 || arch::lane_id() < L::TC)
#pragma unroll
      for (int j = 0; j < T::NJ; ++j)
#pragma unroll
        for (int e = 0; e < T::V; ++e) scratch[g * CP + T::col(j, e)] = s[j * T::V + e];
    __syncthreads();
#pragma unroll
    for (int j = 0; j < T::NJ; ++j)
#pragma unroll
      for (int e = 0; e < T::V; ++e) {
        float acc = scratch[T::col(j, e)];
        for (int h = 1; h < G; ++h) acc = op(acc, scratch[h * CP + T::col(j, e)]);
        s[j * T::V + e] = acc;
      }
  }
#pragma unroll
  for (int k = 0; k < K; ++k) d.v[k] = round_to<D>(init ? op(s[k], init->v[k]) : s[k]);
}

// ---------------------------------------------------------------- global windows
template <class T> struct view2 {  // p points at element [row 0, col 0] of the window
  T* p;
  bool ok;  // the fixed indices are in range
  int rows, cols;
  i64 rs, cs;
};
template <class T> struct view1 {
  T* p;
  bool ok;
  int n;
  i64 s;
};
__device__ __forceinline__ bool in_range(i64 i, int n) { return i >= 0 && i < n; }

// V elements of T <-> V floats through 4/8/16-byte accesses; `p` aligned to min(16, V * sizeof(T)).
template <class T> __device__ __forceinline__ void unpack_words(const u32* w, float* out, int n) {
  for (int k = 0; k < n; ++k) out[k] = __uint_as_float(w[k]);
}
template <> __device__ __forceinline__ void unpack_words<int>(const u32* w, float* out, int n) {
  for (int k = 0; k < n; ++k) out[k] = float(int(w[k]));
}
template <> __device__ __forceinline__ void unpack_words<bf16>(const u32* w, float* out, int n) {
  for (int k = 0; k < n / 2; ++k) { float2 f = arch::unpack2<bf16>(w[k]); out[2 * k] = f.x; out[2 * k + 1] = f.y; }
}
template <> __device__ __forceinline__ void unpack_words<f16>(const u32* w, float* out, int n) {
  for (int k = 0; k < n / 2; ++k) { float2 f = arch::unpack2<f16>(w[k]); out[2 * k] = f.x; out[2 * k + 1] = f.y; }
}
template <class T> __device__ __forceinline__ u32 pack_word(const float* x) { return __float_as_uint(x[0]); }
template <> __device__ __forceinline__ u32 pack_word<int>(const float* x) { return u32(int(x[0])); }
template <> __device__ __forceinline__ u32 pack_word<bf16>(const float* x) { return arch::pack2<bf16>(x[0], x[1]); }
template <> __device__ __forceinline__ u32 pack_word<f16>(const float* x) { return arch::pack2<f16>(x[0], x[1]); }

template <int B> __device__ __forceinline__ void ld_words(const void* p, u32* w, bool read_only) {
  if constexpr (B % 16 == 0) {
#pragma unroll
    for (int q = 0; q < B / 16; ++q) {
      const uint4 x = read_only ? arch::ld_global_nc_v4(static_cast<const char*>(p) + 16 * q)
                                : *reinterpret_cast<const uint4*>(static_cast<const char*>(p) + 16 * q);
      w[4 * q] = x.x, w[4 * q + 1] = x.y, w[4 * q + 2] = x.z, w[4 * q + 3] = x.w;
    }
  } else if constexpr (B == 8) {
    const uint2 x = *reinterpret_cast<const uint2*>(p);
    w[0] = x.x, w[1] = x.y;
  } else {
    w[0] = *reinterpret_cast<const u32*>(p);
  }
}
template <int B> __device__ __forceinline__ void st_words(void* p, const u32* w) {
  if constexpr (B % 16 == 0) {
#pragma unroll
    for (int q = 0; q < B / 16; ++q)
      *reinterpret_cast<uint4*>(static_cast<char*>(p) + 16 * q) = make_uint4(w[4 * q], w[4 * q + 1], w[4 * q + 2], w[4 * q + 3]);
  } else if constexpr (B == 8) {
    *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
  } else {
    *reinterpret_cast<u32*>(p) = w[0];
  }
}

template <class T> struct elem { typedef T type; static constexpr bool read_only = false; };
template <class T> struct elem<const T> { typedef T type; static constexpr bool read_only = true; };

// One chunk of V elements starting at element `c` of row pointer `rp` (column stride cs, `cols` wide).
template <class D, int V, class T>
__device__ __forceinline__ void load_chunk(float* out, T* rp, bool row_in, i64 c, int cols, i64 cs) {
  typedef typename elem<T>::type E;
  constexpr int B = V * int(sizeof(E));
  if constexpr (B % 4 == 0) {
    constexpr int A = B < 16 ? B : 16;
    if (row_in && cs == 1 && c >= 0 && c + V <= cols && (reinterpret_cast<unsigned long long>(rp + c) % A) == 0) {
      u32 w[B / 4];
      ld_words<B>(rp + c, w, elem<T>::read_only);
      unpack_words<E>(w, out, V);
#pragma unroll
      for (int e = 0; e < V; ++e) out[e] = round_to<D>(out[e]);
      return;
    }
  }
#pragma unroll
  for (int e = 0; e < V; ++e)
    out[e] = row_in && in_range(c + e, cols) ? round_to<D>(to_f(rp[(c + e) * cs])) : 0.0f;
}
template <int V, class T>
__device__ __forceinline__ void store_chunk(const float* x, T* rp, bool row_in, i64 c, int cols, i64 cs) {
  constexpr int B = V * int(sizeof(T));
  if constexpr (B % 4 == 0) {
    constexpr int A = B < 16 ? B : 16;
    if (row_in && cs == 1 && c >= 0 && c + V <= cols && (reinterpret_cast<unsigned long long>(rp + c) % A) == 0) {
      constexpr int P = 4 / int(sizeof(T));  // elements per 32-bit word
      u32 w[B / 4];
#pragma unroll
      for (int k = 0; k < B / 4; ++k) w[k] = pack_word<T>(x + k * P);
      st_words<B>(rp + c, w);
      return;
    }
  }
#pragma unroll
  for (int e = 0; e < V; ++e)
    if (row_in && in_range(c + e, cols)) rp[(c + e) * cs] = from_f<T>(x[e]);
}

template <class D, int R, int C, class L, class T>
__device__ __forceinline__ void load(tile<R, C, L>& d, const view2<T>& g, int row0, int col0) {
  typedef tile<R, C, L> X;
#pragma unroll
  for (int i = 0; i < X::NI; ++i) {
    const i64 r = i64(row0) + X::row(i);
    const bool row_in = g.ok && X::row_ok(i) && in_range(r, g.rows);
    T* rp = g.p + r * g.rs;
#pragma unroll
    for (int j = 0; j < X::NJ; ++j)
      load_chunk<D, X::V>(d.v + (i * X::NJ + j) * X::V, rp, row_in && X::chunk_ok(j), i64(col0) + X::col(j), g.cols, g.cs);
  }
}
template <class D, int C, class L, class T>
__device__ __forceinline__ void load(cvec<C, L>& d, const view1<T>& g, int col0) {
  typedef cvec<C, L> X;
#pragma unroll
  for (int j = 0; j < X::NJ; ++j)
    load_chunk<D, X::V>(d.v + j * X::V, g.p, g.ok && X::chunk_ok(j), i64(col0) + X::col(j), g.n, g.s);
}
template <class D, int R, class L, class T>
__device__ __forceinline__ void load(rvec<R, L>& d, const view1<T>& g, int row0) {
  typedef rvec<R, L> X;
#pragma unroll
  for (int i = 0; i < X::NI; ++i) {
    const i64 r = i64(row0) + X::row(i);
    d.v[i] = g.ok && X::row_ok(i) && in_range(r, g.n) ? round_to<D>(to_f(g.p[r * g.s])) : 0.0f;
  }
}

template <int R, int C, class L, class T>
__device__ __forceinline__ void store(const view2<T>& g, const tile<R, C, L>& s, int row0, int col0) {
  typedef tile<R, C, L> X;
#pragma unroll
  for (int i = 0; i < X::NI; ++i) {
    const i64 r = i64(row0) + X::row(i);
    const bool row_in = g.ok && X::row_ok(i) && in_range(r, g.rows);
    T* rp = g.p + r * g.rs;
#pragma unroll
    for (int j = 0; j < X::NJ; ++j)
      store_chunk<X::V>(s.v + (i * X::NJ + j) * X::V, rp, row_in && X::chunk_ok(j), i64(col0) + X::col(j), g.cols, g.cs);
  }
}
template <int C, class L, class T>  // written by thread-row 0 only (the others hold copies)
__device__ __forceinline__ void store(const view1<T>& g, const cvec<C, L>& s, int col0) {
  typedef cvec<C, L> X;
  const bool mine = g.ok && L::tr() == 0;
#pragma unroll
  for (int j = 0; j < X::NJ; ++j)
    store_chunk<X::V>(s.v + j * X::V, g.p, mine && X::chunk_ok(j), i64(col0) + X::col(j), g.n, g.s);
}
template <int R, class L, class T>  // written by thread-column 0 only
__device__ __forceinline__ void store(const view1<T>& g, const rvec<R, L>& s, int row0) {
  typedef rvec<R, L> X;
  const bool mine = g.ok && L::tc() == 0;
#pragma unroll
  for (int i = 0; i < X::NI; ++i) {
    const i64 r = i64(row0) + X::row(i);
    if (mine && X::row_ok(i) && in_range(r, g.n)) g.p[r * g.s] = from_f<T>(s.v[i]);
  }
}

}  // namespace simt
}  // namespace tiles
