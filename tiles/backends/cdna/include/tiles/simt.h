// tiles CDNA SIMT tiles: register tiles, vectors and the OPS.md vocabulary for kernels without mma
// (layernorm, rotary, attention_bwd_prep, ...), written by lower_simt.py op by op from the IR.
//
// Layout (one per kernel, simt::layout<THREADS, TPR, VEC>): a row of every tile is spread over a row
// group of TPR consecutive threads (TPR a power of two; > 64 means the row spans TPR/64 waves), each
// thread taking chunks of VEC consecutive columns: thread t holds columns (t % TPR + TPR*j)*VEC + e of
// rows t / TPR + TR*i, TR = THREADS / TPR row groups. Consecutive lanes hold consecutive 16-byte chunks
// of a row, so buffer loads and stores coalesce. Vectors follow the tiles: a row vector (one value per
// row) is held by every thread of the row's group, a column vector by every row group.
// Elements past a tile's shape ("phantom" slots, when the shape does not split evenly) are computed like
// the others but never reduced over and never stored.
//
// Values are f32 in registers; every op rounds its result to the destination's dtype (the interpreter's
// rule, tiles/core/interp.py). Global memory goes through buffer loads/stores on a resource rebased to the
// window's origin: an element outside the window gets the offset arch::kOob, past num_records, so the
// hardware reads 0 and drops the store.
#pragma once
#include "arch.h"
#include "grid.h"

#ifndef INFINITY
#define INFINITY __builtin_inff()
#endif

namespace tiles {
namespace simt {

TILES_HD int cdiv_(int a, int b) { return (a + b - 1) / b; }

template <int THREADS, int TPR, int VEC>
struct layout {
  static_assert(THREADS % 64 == 0 && THREADS <= 1024, "whole waves, at most 1024 threads");
  static_assert(TPR > 0 && (TPR & (TPR - 1)) == 0 && THREADS % TPR == 0, "TPR: a power of two dividing THREADS");
  static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "VEC: 1, 2, 4 or 8 columns per chunk");
  static constexpr int threads = THREADS, tpr = TPR, vec = VEC, tr = THREADS / TPR, waves = THREADS / 64;
  static constexpr int span = TPR * VEC;  // columns one chunk slot covers across a row group
  TILES_DEV int tid() { return (int)arch::thread_id(); }
  TILES_DEV int rg() { return tid() / TPR; }  // row group
  TILES_DEV int cl() { return tid() % TPR; }  // thread within the row group
};

struct rc_t {
  int r, c;
};

// f32 value rounded to a tile dtype (round to nearest even, as torch's .to())
template <dt D> TILES_DEV float round_to(float x) {
  if constexpr (D == dt::bf16) return arch::bf16_to_f32(arch::f32_to_bf16(x));
  else if constexpr (D == dt::f16) return arch::f16_to_f32(arch::f32_to_f16(x));
  else return x;
}

// ------------------------------------------------------------------ fragments
// Every fragment is a flat float array v[n] plus, per slot k: coord(k) (row, col inside the tile or
// the window), valid(k) (inside the shape), and what load/store need: `chunk` contiguous columns per
// memory access and owner() (the one thread of the replicas that stores).
template <class L, int R, int C, dt D>
struct tile {
  using layout_t = L;
  static constexpr dt dtype = D;
  static constexpr int rows = R, cols = C, ni = cdiv_(R, L::tr), nj = cdiv_(C, L::span), n = ni * nj * L::vec;
  static constexpr int chunk = L::vec, wrows = R, wcols = C;
  float v[n] = {};
  TILES_DEV int slot_row(int k) { return k / (nj * L::vec); }  // row slot i of flat slot k
  TILES_DEV int slot_col(int k) { return k % (nj * L::vec); }  // column slot (j, e) of flat slot k
  TILES_DEV rc_t coord(int k) {
    return rc_t{L::rg() + L::tr * slot_row(k), (L::cl() + L::tpr * (slot_col(k) / L::vec)) * L::vec + k % L::vec};
  }
  TILES_DEV bool valid(int k) {
    const rc_t p = coord(k);
    return (R % L::tr == 0 || p.r < R) && (C % L::span == 0 || p.c < C);
  }
  TILES_DEV bool owner() { return true; }
};

template <class L, int N, dt D>
struct rowvec {  // one value per row: slot i is row rg + TR*i, replicated over the row group
  using layout_t = L;
  static constexpr dt dtype = D;
  static constexpr int len = N, ni = cdiv_(N, L::tr), n = ni;
  static constexpr int chunk = 1, wrows = 1, wcols = N;  // through a 1-D window: element = column
  float v[n] = {};
  TILES_DEV int index(int k) { return L::rg() + L::tr * k; }
  TILES_DEV rc_t coord(int k) { return rc_t{0, index(k)}; }
  TILES_DEV bool valid(int k) { return N % L::tr == 0 || index(k) < N; }
  TILES_DEV bool owner() { return L::cl() == 0; }
};

template <class L, int N, dt D>
struct colvec {  // one value per column: slot (j, e) is column (cl + TPR*j)*VEC + e, replicated over row groups
  using layout_t = L;
  static constexpr dt dtype = D;
  static constexpr int len = N, nj = cdiv_(N, L::span), n = nj * L::vec;
  static constexpr int chunk = L::vec, wrows = 1, wcols = N;
  float v[n] = {};
  TILES_DEV int index(int k) { return (L::cl() + L::tpr * (k / L::vec)) * L::vec + k % L::vec; }
  TILES_DEV rc_t coord(int k) { return rc_t{0, index(k)}; }
  TILES_DEV bool valid(int k) { return N % L::span == 0 || index(k) < N; }
  TILES_DEV bool owner() { return L::rg() == 0; }
};

// the element index a mask or fill_where sees: (row, col) for tiles, the vector index for vectors
template <class L, int R, int C, dt D> TILES_DEV rc_t where(const tile<L, R, C, D>& t, int k) { return t.coord(k); }
template <class L, int N, dt D> TILES_DEV rc_t where(const rowvec<L, N, D>& t, int k) { return rc_t{t.index(k), 0}; }
template <class L, int N, dt D> TILES_DEV rc_t where(const colvec<L, N, D>& t, int k) { return rc_t{t.index(k), 0}; }

// ------------------------------------------------------------------ element-wise
// fmaxf / fminf: a NaN operand gives the other one, as on every backend and in the interpreter
TILES_DEV float max_(float x, float y) { return __builtin_fmaxf(x, y); }
TILES_DEV float min_(float x, float y) { return __builtin_fminf(x, y); }
TILES_DEV float safe_div(float x, float y) { return y == 0.0f ? 0.0f : x / y; }  // x / 0 -> 0 (div_row/div_col)

template <class TD, class TS, class F>
TILES_DEV void map(TD& d, const TS& a, F f) {
  static_assert(TD::n == TS::n, "shape mismatch");
#pragma unroll
  for (int k = 0; k < TD::n; ++k) d.v[k] = round_to<TD::dtype>(f(a.v[k]));
}
template <class TD, class TA, class TB, class F>
TILES_DEV void map2(TD& d, const TA& a, const TB& b, F f) {
  static_assert(TD::n == TA::n && TD::n == TB::n, "shape mismatch");
#pragma unroll
  for (int k = 0; k < TD::n; ++k) d.v[k] = round_to<TD::dtype>(f(a.v[k], b.v[k]));
}

template <class T> TILES_DEV void fill(T& d, float x) { map(d, d, [=](float) { return x; }); }
template <class TD, class TS> TILES_DEV void cast(TD& d, const TS& s) { map(d, s, [](float x) { return x; }); }
template <class TD, class TS> TILES_DEV void copy(TD& d, const TS& s) { map(d, s, [](float x) { return x; }); }
template <class TD, class TS> TILES_DEV void neg(TD& d, const TS& s) { map(d, s, [](float x) { return -x; }); }
template <class TD, class TS> TILES_DEV void abs(TD& d, const TS& s) { map(d, s, [](float x) { return __builtin_fabsf(x); }); }
template <class TD, class TS> TILES_DEV void exp2(TD& d, const TS& s) { map(d, s, [](float x) { return arch::exp2(x); }); }
template <class TD, class TS> TILES_DEV void exp(TD& d, const TS& s) { map(d, s, [](float x) { return arch::exp2(x * 1.4426950408889634f); }); }
template <class TD, class TS> TILES_DEV void log2(TD& d, const TS& s) { map(d, s, [](float x) { return arch::log2(x); }); }
template <class TD, class TS> TILES_DEV void log(TD& d, const TS& s) { map(d, s, [](float x) { return arch::log2(x) * 0.6931471805599453f; }); }
template <class TD, class TS> TILES_DEV void rsqrt(TD& d, const TS& s) { map(d, s, [](float x) { return arch::rsqrt(x); }); }

#define TILES_SIMT_BINARY(NAME, EXPR)                                                                          \
  template <class TD, class TA, class TB>                                                                      \
  TILES_DEV void NAME(TD& d, const TA& a, const TB& b) { map2(d, a, b, [](float x, float y) { return EXPR; }); } \
  template <class TD, class TA>                                                                                \
  TILES_DEV void NAME(TD& d, const TA& a, float y) { map(d, a, [=](float x) { return EXPR; }); }
TILES_SIMT_BINARY(add, x + y)
TILES_SIMT_BINARY(sub, x - y)
TILES_SIMT_BINARY(mul, x * y)
TILES_SIMT_BINARY(div, x / y)
TILES_SIMT_BINARY(max, max_(x, y))
TILES_SIMT_BINARY(min, min_(x, y))
#undef TILES_SIMT_BINARY

// ------------------------------------------------------------------ broadcasts (row: v per row; col: v per column)
#define TILES_SIMT_BCAST(NAME, EXPR)                                                                           \
  template <class TD, class TS, class V>                                                                       \
  TILES_DEV void NAME##_row(TD& d, const TS& t, const V& v) {                                                  \
    static_assert(TD::n == TS::n && V::ni == TS::ni, "row vector / tile mismatch");                            \
    _Pragma("unroll") for (int k = 0; k < TD::n; ++k) {                                                        \
      const float x = t.v[k], y = v.v[TS::slot_row(k)];                                                        \
      d.v[k] = round_to<TD::dtype>(EXPR);                                                                      \
    }                                                                                                          \
  }                                                                                                            \
  template <class TD, class TS, class V>                                                                       \
  TILES_DEV void NAME##_col(TD& d, const TS& t, const V& v) {                                                  \
    static_assert(TD::n == TS::n && V::nj == TS::nj, "column vector / tile mismatch");                         \
    _Pragma("unroll") for (int k = 0; k < TD::n; ++k) {                                                        \
      const float x = t.v[k], y = v.v[TS::slot_col(k)];                                                        \
      d.v[k] = round_to<TD::dtype>(EXPR);                                                                      \
    }                                                                                                          \
  }
TILES_SIMT_BCAST(add, x + y)
TILES_SIMT_BCAST(sub, x - y)
TILES_SIMT_BCAST(mul, x * y)
TILES_SIMT_BCAST(div, safe_div(x, y))
#undef TILES_SIMT_BCAST

// ------------------------------------------------------------------ masks (row0/col0: the tile's origin)
template <class T> TILES_DEV void mask_causal(T& t, int row0, int col0, int offset, float value) {
#pragma unroll
  for (int k = 0; k < T::n; ++k) {
    const rc_t p = where(t, k);
    if (col0 + p.c > row0 + p.r + offset) t.v[k] = round_to<T::dtype>(value);
  }
}
template <class T> TILES_DEV void mask_window(T& t, int row0, int col0, int offset, float value) {
#pragma unroll
  for (int k = 0; k < T::n; ++k) {
    const rc_t p = where(t, k);
    if (col0 + p.c < row0 + p.r + offset) t.v[k] = round_to<T::dtype>(value);
  }
}
template <class T> TILES_DEV void mask_cols(T& t, int col0, int limit, float value) {
#pragma unroll
  for (int k = 0; k < T::n; ++k)
    if (col0 + where(t, k).c >= limit) t.v[k] = round_to<T::dtype>(value);
}
template <class T> TILES_DEV void mask_rows(T& t, int row0, int limit, float value) {
#pragma unroll
  for (int k = 0; k < T::n; ++k)
    if (row0 + where(t, k).r >= limit) t.v[k] = round_to<T::dtype>(value);
}
// d[i] = value where (ref[i] CMP rhs), CMP: 0 ==, 1 !=, 2 <, 3 <=, 4 >, 5 >=
template <int CMP, class TD, class TR> TILES_DEV void fill_where(TD& d, const TR& ref, float rhs, float value) {
  static_assert(TD::n == TR::n, "shape mismatch");
#pragma unroll
  for (int k = 0; k < TD::n; ++k) {
    const float x = ref.v[k];
    const bool p = CMP == 0 ? x == rhs : CMP == 1 ? x != rhs : CMP == 2 ? x < rhs : CMP == 3 ? x <= rhs : CMP == 4 ? x > rhs : x >= rhs;
    if (p) d.v[k] = round_to<TD::dtype>(value);
  }
}

// ------------------------------------------------------------------ reductions
struct op_max {
  TILES_DEV float init() { return -INFINITY; }
  TILES_DEV float f(float a, float b) { return max_(a, b); }
};
struct op_sum {
  TILES_DEV float init() { return 0.0f; }
  TILES_DEV float f(float a, float b) { return a + b; }
};

// butterfly over lanes l ^ M for M in [LO, HI): all lanes end with the same value (the ops commute)
template <class OP, int LO, int HI> TILES_DEV float xor_reduce(float x) {
  if constexpr (LO <= 1 && 1 < HI) x = OP::f(x, arch::shfl_xor<1>(x));
  if constexpr (LO <= 2 && 2 < HI) x = OP::f(x, arch::shfl_xor<2>(x));
  if constexpr (LO <= 4 && 4 < HI) x = OP::f(x, arch::shfl_xor<4>(x));
  if constexpr (LO <= 8 && 8 < HI) x = OP::f(x, arch::shfl_xor<8>(x));
  if constexpr (LO <= 16 && 16 < HI) x = OP::f(x, arch::shfl_xor<16>(x));
  if constexpr (LO <= 32 && 32 < HI) x = OP::f(x, arch::shfl_xor<32>(x));
  return x;
}

TILES_DEV float lds_get(u32 a) { return __builtin_bit_cast(float, arch::lds_read_b32(a)); }
TILES_DEV void lds_put(u32 a, float x) { arch::lds_write_b32(a, __builtin_bit_cast(u32, x)); }

// LDS floats a reduction needs to cross waves (0: it stays inside a wave); lower_simt.py sizes `red` with it
template <class L> TILES_HD int row_red_floats(int ni) { return L::tpr > 64 ? L::waves * ni : 0; }
template <class L> TILES_HD int col_red_floats(int k) {
  const int g = L::tpr < 64 ? L::tpr : 64, wpr = L::tpr > 64 ? L::tpr / 64 : 1;
  return L::waves / wpr > 1 ? L::waves * k * g : 0;
}

// v[r] = reduce over the columns of t[r, :], combined with init (which may alias v)
template <class OP, class V, class T>
TILES_DEV void row_reduce(V& v, const T& t, const V* init, float* red) {
  using L = typename T::layout_t;
  static_assert(V::ni == T::ni, "row vector / tile mismatch");
  constexpr int ni = T::ni, per_row = T::nj * L::vec;
  float x[ni];
#pragma unroll
  for (int i = 0; i < ni; ++i) {
    float acc = OP::init();
#pragma unroll
    for (int q = 0; q < per_row; ++q)
      if (t.valid(i * per_row + q)) acc = OP::f(acc, t.v[i * per_row + q]);
    x[i] = xor_reduce<OP, 1, (L::tpr < 64 ? L::tpr : 64)>(acc);  // the row group's lanes in this wave
  }
  if constexpr (L::tpr > 64) {  // the row spans TPR/64 waves: combine their partials through LDS
    constexpr int wpr = L::tpr / 64;
    const int wave = L::tid() / 64, first = (wave / wpr) * wpr;
    const u32 base = arch::lds_addr(red);
    arch::barrier();  // earlier readers of `red` are done
    if (L::tid() % 64 == 0)
#pragma unroll
      for (int i = 0; i < ni; ++i) lds_put(base + 4u * (u32)(wave * ni + i), x[i]);
    arch::wait_lgkmcnt<0>();
    arch::barrier();
#pragma unroll
    for (int i = 0; i < ni; ++i) {
      float acc = OP::init();
#pragma unroll
      for (int w = 0; w < wpr; ++w) acc = OP::f(acc, lds_get(base + 4u * (u32)((first + w) * ni + i)));
      x[i] = acc;
    }
  }
#pragma unroll
  for (int i = 0; i < ni; ++i) v.v[i] = round_to<V::dtype>(init ? OP::f(x[i], init->v[i]) : x[i]);
}

// v[c] = reduce over the rows of t[:, c], combined with init (which may alias v)
template <class OP, class V, class T>
TILES_DEV void col_reduce(V& v, const T& t, const V* init, float* red) {
  using L = typename T::layout_t;
  static_assert(V::nj == T::nj, "column vector / tile mismatch");
  constexpr int kk = T::nj * L::vec;
  float x[kk];
#pragma unroll
  for (int q = 0; q < kk; ++q) {
    float acc = OP::init();
#pragma unroll
    for (int i = 0; i < T::ni; ++i)
      if (t.valid(i * kk + q)) acc = OP::f(acc, t.v[i * kk + q]);
    x[q] = xor_reduce<OP, L::tpr, 64>(acc);  // the row groups inside this wave (TPR < 64)
  }
  constexpr int g = L::tpr < 64 ? L::tpr : 64, wpr = L::tpr > 64 ? L::tpr / 64 : 1, groups = L::waves / wpr;
  if constexpr (groups > 1) {  // waves holding other rows of the same columns: combine through LDS
    const int wave = L::tid() / 64, lane = L::tid() % 64, cw = wave % wpr;
    const u32 base = arch::lds_addr(red);
    arch::barrier();
    if (lane < g)
#pragma unroll
      for (int q = 0; q < kk; ++q) lds_put(base + 4u * (u32)((wave * kk + q) * g + lane), x[q]);
    arch::wait_lgkmcnt<0>();
    arch::barrier();
#pragma unroll
    for (int q = 0; q < kk; ++q) {
      float acc = OP::init();
#pragma unroll
      for (int s = 0; s < groups; ++s) acc = OP::f(acc, lds_get(base + 4u * (u32)(((s * wpr + cw) * kk + q) * g + lane % g)));
      x[q] = acc;
    }
  }
#pragma unroll
  for (int q = 0; q < kk; ++q) v.v[q] = round_to<V::dtype>(init ? OP::f(x[q], init->v[q]) : x[q]);
}

// v = reduce(t), or v = reduce(t) combined with init (which may be v itself)
#define TILES_SIMT_REDUCE(NAME, KIND, OP)                                                                      \
  template <class V, class T> TILES_DEV void NAME(V& v, const T& t, float* red) { KIND<OP>(v, t, (const V*)nullptr, red); } \
  template <class V, class T> TILES_DEV void NAME(V& v, const T& t, const V& init, float* red) { KIND<OP>(v, t, &init, red); }
TILES_SIMT_REDUCE(row_max, row_reduce, op_max)
TILES_SIMT_REDUCE(row_sum, row_reduce, op_sum)
TILES_SIMT_REDUCE(col_max, col_reduce, op_max)
TILES_SIMT_REDUCE(col_sum, col_reduce, op_sum)
#undef TILES_SIMT_REDUCE

// ------------------------------------------------------------------ global memory
template <dt G> struct gtype {
  static constexpr int bytes = G == dt::f32 ? 4 : 2;
  TILES_DEV float to_f32(u32 bits) {
    if constexpr (G == dt::f32) return __builtin_bit_cast(float, bits);
    else if constexpr (G == dt::bf16) return arch::bf16_to_f32((u16)bits);
    else return arch::f16_to_f32((u16)bits);
  }
  TILES_DEV u32 from_f32(float x) {
    if constexpr (G == dt::f32) return __builtin_bit_cast(u32, x);
    else if constexpr (G == dt::bf16) return arch::f32_to_bf16(x);
    else return arch::f32_to_f16(x);
  }
};

// A window of a global tensor: rows x cols elements, strides rs / cs (elements) from element `base`;
// ok = the window's fixed indices are inside the tensor. A 1-D window is rows = 1, cols = n.
template <dt G>
struct window {
  const void* p;
  long long base;
  int rows, cols, rs, cs;
  bool ok;
};
template <dt G> TILES_DEV window<G> window2(const void* p, long long base, int rows, int cols, int rs, int cs, bool ok = true) {
  return window<G>{p, base, rows, cols, rs, cs, ok};
}
template <dt G> TILES_DEV window<G> window1(const void* p, long long base, int n, int stride, bool ok = true) {
  return window<G>{p, base, 1, n, 0, stride, ok};
}
TILES_DEV bool in(int i, int n) { return (unsigned)i < (unsigned)n; }

// the resource of a fragment's window at (row0, col0): rebased there (32-bit offsets stay small) and as
// long as the fragment's span, clamped below kOob
template <class T, dt G>
TILES_DEV const char* rebase(const window<G>& w, int row0, int col0) {
  return (const char*)w.p + (w.base + (long long)row0 * w.rs + (long long)col0 * w.cs) * gtype<G>::bytes;
}
template <class T, dt G>
TILES_DEV arch::rsrc_t resource(const window<G>& w, const char* p) {
  long long span = ((long long)(T::wrows - 1) * w.rs + (long long)(T::wcols - 1) * w.cs + 1) * gtype<G>::bytes;
  if (span > 0x7fffffffLL) span = 0x7fffffffLL;
  if (span < 0 || !w.ok) span = 0;
  return arch::make_rsrc(p, (u32)span);
}
// whole chunks may move as one access when the columns are contiguous and every chunk is aligned to it
template <class T, dt G>
TILES_DEV bool chunks_aligned(const window<G>& w, const char* p) {
  constexpr int nb = T::chunk * gtype<G>::bytes, a = nb < 16 ? nb : 16;
  if constexpr (T::chunk == 1 || nb < 4) return false;
  else return w.cs == 1 && ((unsigned long)p % a) == 0 && ((long long)w.rs * gtype<G>::bytes) % a == 0;
}

template <int NB> struct raw {
  u32 w[NB / 4];
};
template <int NB> TILES_DEV raw<NB> load_raw(arch::rsrc_t r, u32 off) {
  raw<NB> x;
  if constexpr (NB == 4) {
    x.w[0] = arch::buffer_load_b32(r, off);
  } else if constexpr (NB == 8) {
    const u32x2 a = arch::buffer_load_b64(r, off);
    x.w[0] = a[0], x.w[1] = a[1];
  } else {
    static_assert(NB % 16 == 0, "chunk of 4, 8 or 16*k bytes");
#pragma unroll
    for (int q = 0; q < NB / 16; ++q) {
      const u32x4 a = arch::buffer_load_b128(r, off + 16u * q);
      x.w[4 * q] = a[0], x.w[4 * q + 1] = a[1], x.w[4 * q + 2] = a[2], x.w[4 * q + 3] = a[3];
    }
  }
  return x;
}
template <int NB> TILES_DEV void store_raw(const raw<NB>& x, arch::rsrc_t r, u32 off) {
  if constexpr (NB == 4) {
    arch::buffer_store_b32(x.w[0], r, off);
  } else if constexpr (NB == 8) {
    arch::buffer_store_b64(u32x2{x.w[0], x.w[1]}, r, off);
  } else {
#pragma unroll
    for (int q = 0; q < NB / 16; ++q)
      arch::buffer_store_b128(u32x4{x.w[4 * q], x.w[4 * q + 1], x.w[4 * q + 2], x.w[4 * q + 3]}, r, off + 16u * q);
  }
}

// d <- window at (row0, col0); elements outside the window (or the fragment's shape) read 0
template <class T, dt G>
TILES_DEV void load(T& d, const window<G>& w, int row0, int col0) {
  constexpr int V = T::chunk, EB = gtype<G>::bytes, NB = V * EB;
  const char* p = rebase<T>(w, row0, col0);
  const arch::rsrc_t r = resource<T>(w, p);
  const bool whole = chunks_aligned<T>(w, p);
#pragma unroll
  for (int k0 = 0; k0 < T::n; k0 += V) {
    const rc_t at = d.coord(k0);
    const bool row_in = w.ok && in(row0 + at.r, w.rows) && (T::wrows == 1 || at.r < T::wrows);
    const int c = col0 + at.c;
    if constexpr (V > 1 && NB >= 4) {
      if (whole && c >= 0 && c + V <= w.cols && at.c + V <= T::wcols) {
        const raw<NB> x = load_raw<NB>(r, row_in ? (u32)((at.r * w.rs + at.c) * EB) : arch::kOob);
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const u32 bits = EB == 4 ? x.w[e] : (x.w[e / 2] >> (16 * (e % 2))) & 0xffffu;
          d.v[k0 + e] = round_to<T::dtype>(gtype<G>::to_f32(bits));
        }
        continue;
      }
    }
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const bool ok = row_in && in(c + e, w.cols) && d.valid(k0 + e);
      const u32 off = ok ? (u32)((at.r * w.rs + (at.c + e) * w.cs) * EB) : arch::kOob;
      const u32 bits = EB == 4 ? arch::buffer_load_b32(r, off) : (u32)arch::buffer_load_b16(r, off);
      d.v[k0 + e] = round_to<T::dtype>(gtype<G>::to_f32(bits));
    }
  }
}

// window at (row0, col0) <- s, converted to the window's dtype; elements outside it are dropped, and of
// the threads holding the same vector element only its owner stores
template <dt G, class T>
TILES_DEV void store(const window<G>& w, const T& s, int row0, int col0) {
  constexpr int V = T::chunk, EB = gtype<G>::bytes, NB = V * EB;
  const char* p = rebase<T>(w, row0, col0);
  const arch::rsrc_t r = resource<T>(w, p);
  const bool whole = chunks_aligned<T>(w, p);
  const bool mine = s.owner();
#pragma unroll
  for (int k0 = 0; k0 < T::n; k0 += V) {
    const rc_t at = s.coord(k0);
    const bool row_in = mine && w.ok && in(row0 + at.r, w.rows) && (T::wrows == 1 || at.r < T::wrows);
    const int c = col0 + at.c;
    if constexpr (V > 1 && NB >= 4) {
      if (whole && c >= 0 && c + V <= w.cols && at.c + V <= T::wcols) {
        raw<NB> x;
#pragma unroll
        for (int q = 0; q < NB / 4; ++q) x.w[q] = 0;
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const u32 bits = gtype<G>::from_f32(s.v[k0 + e]);
          if constexpr (EB == 4) x.w[e] = bits;
          else x.w[e / 2] |= bits << (16 * (e % 2));
        }
        store_raw<NB>(x, r, row_in ? (u32)((at.r * w.rs + at.c) * EB) : arch::kOob);
        continue;
      }
    }
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const bool ok = row_in && in(c + e, w.cols) && s.valid(k0 + e);
      const u32 off = ok ? (u32)((at.r * w.rs + (at.c + e) * w.cs) * EB) : arch::kOob;
      const u32 bits = gtype<G>::from_f32(s.v[k0 + e]);
      if constexpr (EB == 4) arch::buffer_store_b32(bits, r, off);
      else arch::buffer_store_b16((u16)bits, r, off);
    }
  }
}

}  // namespace simt
}  // namespace tiles
