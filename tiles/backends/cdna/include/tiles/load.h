// tiles CDNA data movement: global -> registers (buffer loads, bounds by the hardware), registers ->
// LDS (swizzled ds_write, optionally transposing 16-bit values), LDS -> MFMA operand tiles
// (ds_read_b128) and accumulators -> global (buffer stores; out-of-range lanes are dropped).
#pragma once
#include "rt.h"
#include "st.h"

namespace tiles {

// A 2-D global view of `rows` x `cols` elements of EB bytes with row stride `ld` elements.
// The buffer resource covers exactly rows*ld*EB bytes from `base` (callers rebase per block so this stays
// below 2 GiB, where arch::kOob is out of range); any offset past it reads 0 / drops the store.
template <int EB>
struct gview {
  arch::rsrc_t r;
  int rows, cols, ld;
};
template <int EB>
TILES_DEV gview<EB> make_view(const void* base, int rows, int cols, int ld) {
  long long bytes = (long long)rows * ld * EB;
  if (bytes > 0x7fffffffLL) bytes = 0x7fffffffLL;
  if (bytes < 0) bytes = 0;
  return gview<EB>{arch::make_rsrc(base, (u32)bytes), rows, cols, ld};
}
// offset of (r, c) when the whole 16-byte vector [c, c + VEC) is inside the view, else kOob
template <int EB, int VEC>
TILES_DEV u32 vec_offset(const gview<EB>& g, int r, int c) {
  const bool in = (r >= 0) & (r < g.rows) & (c >= 0) & (c + VEC <= g.cols);
  return in ? (u32)((r * g.ld + c) * EB) : arch::kOob;
}

// ------------------------------------------------------------------ k-contiguous stage (GEMM A)
// ROWS x COLS tile of 16-bit values, loaded by THREADS threads as 16-byte vectors: thread t takes
// vector (t % cpr) of row (t / cpr), then t + THREADS, ... (8 lanes cover a 128-byte row: coalesced).
// When the vectors do not split evenly the last pass is partial; it must end on a wave boundary so the
// branch is wave-uniform (and every wave's vmcnt arithmetic stays the same for the loads after it).
template <int ROWS, int COLS, int THREADS>
struct stage_k {
  static constexpr int cpr = COLS / 8, total = ROWS * (COLS / 8), n = (total + THREADS - 1) / THREADS;
  static_assert(COLS % 8 == 0 && total % 64 == 0, "stage must split into whole waves of 16-byte vectors");
  TILES_HD bool active(int t) { return total % THREADS == 0 || t < total; }
  u32x4 v[n];
};
// pass p of load_stage alone (the 4-wave interleave issues global loads one by one between MFMAs)
template <int ROWS, int COLS, int THREADS>
TILES_DEV void load_stage_pass(stage_k<ROWS, COLS, THREADS>& s, const gview<2>& g, int row0, int col0, u32 tid, int p) {
  const int t = (int)tid + p * THREADS, r = t / s.cpr, c = (t % s.cpr) * 8;
  if (s.active(t)) arch::buffer_load_b128_async(s.v[p], g.r, vec_offset<2, 8>(g, row0 + r, col0 + c));
}
template <int ROWS, int COLS, int THREADS>
TILES_DEV void load_stage(stage_k<ROWS, COLS, THREADS>& s, const gview<2>& g, int row0, int col0, u32 tid) {
#pragma unroll
  for (int p = 0; p < s.n; ++p) load_stage_pass(s, g, row0, col0, tid, p);
}
template <class ST, int ROWS, int COLS, int THREADS>
TILES_DEV void store_stage(u32 lds, const stage_k<ROWS, COLS, THREADS>& s, u32 tid) {
  static_assert(ST::rows == ROWS && ST::cols == COLS, "stage and LDS tile shapes differ");
#pragma unroll
  for (int p = 0; p < s.n; ++p) {
    const int t = (int)tid + p * THREADS, r = t / s.cpr, c = (t % s.cpr) * 8;
    if (s.active(t)) arch::lds_write_b128(lds + ST::offset(r, c), s.v[p]);
  }
}

#if defined(__gfx950__)
// gfx950: the same k-contiguous tile loaded straight into LDS. A wave's load lands on 1024 contiguous
// bytes (lane i at +16 i), so the swizzle is applied on the global side: the lane that fills physical
// chunk q of swizzle block B loads logical chunk q ^ swz(B) (the XOR swizzle is its own inverse).
template <class ST, int THREADS>
TILES_DEV void load_lds_direct(u32 lds, const gview<2>& g, int row0, int col0, u32 tid) {
  constexpr int total = ST::rows * ST::cols / 8;  // 16-byte vectors
  static_assert(total % THREADS == 0, "direct LDS stage must split evenly over the threads");
  const u32 wave_base = (tid & ~63u) * 16u;  // wave-uniform part of the destination
#pragma unroll
  for (int p = 0; p < total / THREADS; ++p) {
    const u32 phys = (u32)(p * THREADS) * 16u + tid * 16u;  // this lane's destination byte in the tile
    const u32 blk = phys >> ST::block_shift, chunk = ((phys >> 4) & ST::chunk_mask) ^ ST::swz(blk);
    const u32 lin = (blk << ST::block_shift) | (chunk << 4);
    const int r = (int)(lin / ST::row_bytes), c = (int)(lin % ST::row_bytes) / 2;
    arch::buffer_load_lds_b128(g.r, vec_offset<2, 8>(g, row0 + r, col0 + c),
                               arch::readfirstlane(lds + (u32)(p * THREADS) * 16u + wave_base));
  }
}
#endif

// ------------------------------------------------------------------ transposing stage (GEMM B, K x N row-major)
// KT x NT tile; thread t holds KR consecutive k-rows of one 8-wide n-vector: k-group t % (KT/KR),
// n-vector t / (KT/KR). It is written to an NT x KT LDS tile (k contiguous) as 8 writes of KR values.
template <int KT, int NT, int KR, int THREADS>
struct stage_t {
  static constexpr int groups = KT / KR, n = (KT / KR) * (NT / 8) / THREADS;
  static_assert(KT % KR == 0 && NT % 8 == 0 && ((KT / KR) * (NT / 8)) % THREADS == 0, "stage must split evenly");
  static_assert(KR == 2 || KR == 4 || KR == 8, "KR: 2 (ds_write_b32), 4 (b64) or 8 (b128)");
  u32x4 v[n][KR];
};
// load q of pass p of load_stage_t alone
template <int KT, int NT, int KR, int THREADS>
TILES_DEV void load_stage_t_one(stage_t<KT, NT, KR, THREADS>& s, const gview<2>& g, int k0, int n0, u32 tid, int p, int q) {
  const int t = (int)tid + p * THREADS, kg = t % s.groups, nv = t / s.groups;
  arch::buffer_load_b128_async(s.v[p][q], g.r, vec_offset<2, 8>(g, k0 + kg * KR + q, n0 + nv * 8));
}
template <int KT, int NT, int KR, int THREADS>
TILES_DEV void load_stage_t(stage_t<KT, NT, KR, THREADS>& s, const gview<2>& g, int k0, int n0, u32 tid) {
#pragma unroll
  for (int p = 0; p < s.n; ++p)
#pragma unroll
    for (int q = 0; q < KR; ++q) load_stage_t_one(s, g, k0, n0, tid, p, q);
}
// the 16-bit value e of two rows x, y packed as (x_e | y_e << 16)
TILES_DEV u32 pack_pair(u32x4 x, u32x4 y, int e) {
  const u32 a = x[e >> 1], b = y[e >> 1];
  return (e & 1) ? ((a >> 16) | (b & 0xffff0000u)) : ((a & 0xffffu) | (b << 16));
}
template <class ST, int KT, int NT, int KR, int THREADS>
TILES_DEV void store_stage_t(u32 lds, const stage_t<KT, NT, KR, THREADS>& s, u32 tid) {
  static_assert(ST::rows == NT && ST::cols == KT, "transposed LDS tile must be NT x KT");
#pragma unroll
  for (int p = 0; p < s.n; ++p) {
    const int t = (int)tid + p * THREADS, kg = t % s.groups, nv = t / s.groups;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const u32 a = lds + ST::offset(nv * 8 + e, kg * KR);
      if constexpr (KR == 2) arch::lds_write_b32(a, pack_pair(s.v[p][0], s.v[p][1], e));
      else if constexpr (KR == 4) arch::lds_write_b64(a, u32x2{pack_pair(s.v[p][0], s.v[p][1], e), pack_pair(s.v[p][2], s.v[p][3], e)});
      else arch::lds_write_b128(a, u32x4{pack_pair(s.v[p][0], s.v[p][1], e), pack_pair(s.v[p][2], s.v[p][3], e),
                                          pack_pair(s.v[p][4], s.v[p][5], e), pack_pair(s.v[p][6], s.v[p][7], e)});
    }
  }
}

// ------------------------------------------------------------------ LDS -> MFMA operand
// chunk (i, s) alone: one ds_read_b128 (the 4-wave interleave issues the reads one by one between MFMAs)
template <class ST, int ROWS, int K, int MF>
TILES_DEV void load_op_chunk(rt_op<ROWS, K, MF>& d, u32 lds, int row0, int k0, int i, int s) {
  const int lane = (int)arch::lane_id();
  d.c[i][s] = arch::lds_read_b128(lds + ST::offset(row0 + d.row_of(lane, i), k0 + d.k_of(lane, s)));
}
template <class ST, int ROWS, int K, int MF>
TILES_DEV void load_op(rt_op<ROWS, K, MF>& d, u32 lds, int row0, int k0) {
#pragma unroll
  for (int i = 0; i < d.rb; ++i)
#pragma unroll
    for (int s = 0; s < d.kb; ++s) load_op_chunk<ST>(d, lds, row0, k0, i, s);
}
// global -> MFMA operand directly (k contiguous; vectors crossing the edge read as 0: needs cols % 8 == 0)
template <int ROWS, int K, int MF>
TILES_DEV void load_op(rt_op<ROWS, K, MF>& d, const gview<2>& g, int row0, int k0) {
  const int lane = (int)arch::lane_id();
#pragma unroll
  for (int i = 0; i < d.rb; ++i)
#pragma unroll
    for (int s = 0; s < d.kb; ++s) d.c[i][s] = arch::buffer_load_b128(g.r, vec_offset<2, 8>(g, row0 + d.row_of(lane, i), k0 + d.k_of(lane, s)));
}

// ------------------------------------------------------------------ accumulators -> global
template <dt OUT> TILES_DEV u32 to_bits16(float x) { return OUT == dt::bf16 ? arch::f32_to_bf16(x) : arch::f32_to_f16(x); }

// Store an accumulator that holds C^T (acc rows = output columns, acc cols = output rows), as the GEMM
// computes it: each lane then owns 4 consecutive output columns per 4 registers -> one 16-byte (f32) or
// 8-byte (16-bit) store. (row0, col0): output coordinates of acc element (0, 0).
template <dt OUT, int EB, int R, int C, int MF>
TILES_DEV void store_acc_T(const gview<EB>& g, const rt_acc<R, C, MF>& acc, int row0, int col0) {
  const int lane = (int)arch::lane_id();
#pragma unroll
  for (int i = 0; i < acc.rb; ++i)
#pragma unroll
    for (int j = 0; j < acc.cb; ++j)
#pragma unroll
      for (int q = 0; q < acc.nreg / 4; ++q) {
        const int orow = row0 + acc.col_of(lane, j), ocol = col0 + acc.row_of(lane, i, 4 * q);
        const f32x4 v = {acc.d[i][j][4 * q], acc.d[i][j][4 * q + 1], acc.d[i][j][4 * q + 2], acc.d[i][j][4 * q + 3]};
        if (orow < g.rows && ocol + 4 <= g.cols) {  // common case: whole vector inside
          const u32 off = (u32)((orow * g.ld + ocol) * EB);
          if constexpr (OUT == dt::f32) arch::buffer_store_b128(__builtin_bit_cast(u32x4, v), g.r, off);
          else arch::buffer_store_b64(u32x2{to_bits16<OUT>(v[0]) | (to_bits16<OUT>(v[1]) << 16), to_bits16<OUT>(v[2]) | (to_bits16<OUT>(v[3]) << 16)}, g.r, off);
        } else if (orow < g.rows) {  // right edge: element by element
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const u32 off = ocol + e < g.cols ? (u32)((orow * g.ld + ocol + e) * EB) : arch::kOob;
            const float x = v[e];  // a scalar first: bit-casting a vector element reads element 0 (clang)
            if constexpr (OUT == dt::f32) arch::buffer_store_b32(__builtin_bit_cast(u32, x), g.r, off);
            else arch::buffer_store_b16((u16)to_bits16<OUT>(x), g.r, off);
          }
        }
      }
}

// Store an accumulator in its own orientation (OPS `store`): element by element, out of range dropped.
template <dt OUT, int EB, int R, int C, int MF>
TILES_DEV void store(const gview<EB>& g, const rt_acc<R, C, MF>& acc, int row0, int col0) {
  const int lane = (int)arch::lane_id();
#pragma unroll
  for (int i = 0; i < acc.rb; ++i)
#pragma unroll
    for (int j = 0; j < acc.cb; ++j)
#pragma unroll
      for (int r = 0; r < acc.nreg; ++r) {
        const int orow = row0 + acc.row_of(lane, i, r), ocol = col0 + acc.col_of(lane, j);
        const bool in = orow < g.rows && ocol < g.cols;
        const u32 off = in ? (u32)((orow * g.ld + ocol) * EB) : arch::kOob;
        const float x = acc.d[i][j][r];  // a scalar first: bit-casting a vector element reads element 0 (clang)
        if constexpr (OUT == dt::f32) arch::buffer_store_b32(__builtin_bit_cast(u32, x), g.r, off);
        else arch::buffer_store_b16((u16)to_bits16<OUT>(x), g.r, off);
      }
}
// Load an accumulator-shaped tile (OPS `load` into a register tile): out of range reads 0.
template <dt IN, int EB, int R, int C, int MF>
TILES_DEV void load(rt_acc<R, C, MF>& acc, const gview<EB>& g, int row0, int col0) {
  const int lane = (int)arch::lane_id();
#pragma unroll
  for (int i = 0; i < acc.rb; ++i)
#pragma unroll
    for (int j = 0; j < acc.cb; ++j)
#pragma unroll
      for (int r = 0; r < acc.nreg; ++r) {
        const int orow = row0 + acc.row_of(lane, i, r), ocol = col0 + acc.col_of(lane, j);
        const bool in = orow < g.rows && ocol < g.cols;
        const u32 off = in ? (u32)((orow * g.ld + ocol) * EB) : arch::kOob;
        if constexpr (IN == dt::f32) acc.d[i][j][r] = __builtin_bit_cast(float, arch::buffer_load_b32(g.r, off));
        else if constexpr (IN == dt::bf16) acc.d[i][j][r] = arch::bf16_to_f32(arch::buffer_load_b16(g.r, off));
        else acc.d[i][j][r] = arch::f16_to_f32(arch::buffer_load_b16(g.r, off));
      }
}


// ------------------------------------------------------------------ attention (transposed tiles, rt.h rt_t)
// A operand whose MFMA result is a permuted transposed tile (rt_t<.., PERM = true>): operand row R is
// tile row key_perm<MF>(R) (a bit permutation inside 32-row groups: same addresses, another order).
template <class ST, int ROWS, int K, int MF>
TILES_DEV void load_op_perm(rt_op<ROWS, K, MF>& d, u32 lds, int row0, int k0) {
  static_assert(ROWS % 32 == 0, "permuted operands cover whole 32-row groups");
  const int lane = (int)arch::lane_id();
#pragma unroll
  for (int i = 0; i < d.rb; ++i)
#pragma unroll
    for (int s = 0; s < d.kb; ++s)
      d.c[i][s] = arch::lds_read_b128(lds + ST::offset(row0 + key_perm<MF>(d.row_of(lane, i)), k0 + d.k_of(lane, s)));
}
// Store a transposed tile in its logical orientation: the accumulator holds the transpose, so each lane
// owns 4 consecutive logical columns per 4 registers (one 8- or 16-byte buffer_store); out of range dropped.
template <dt OUT, int EB, int R, int C, int MF>
TILES_DEV void store(const gview<EB>& g, const rt_t<R, C, MF, false>& t, int row0, int col0) {
  store_acc_T<OUT>(g, static_cast<const rt_acc<C, R, MF>&>(t), row0, col0);
}
// Store a logical per-row vector of a transposed tile (rv_col of its accumulator) to a 1-D view
// (g.cols elements, contiguous): the lanes of lane group 0 write their query's value.
template <int R, int MF>
TILES_DEV void store_vec(const gview<4>& g, const rv_col<R, MF>& v, int row0) {
  const int lane = (int)arch::lane_id();
#pragma unroll
  for (int j = 0; j < R / MF; ++j) {
    const int r = row0 + j * MF + lane % MF;
    const u32 off = (lane < MF && r < g.cols) ? (u32)(r * 4) : arch::kOob;
    const float x = v.v[j];
    arch::buffer_store_b32(__builtin_bit_cast(u32, x), g.r, off);
  }
}

// Load a logical per-row vector of a transposed tile (rv_col of its accumulator) from a 1-D f32 view
// (OPS `load` into a vec, e.g. attention backward's LSE and Delta): every lane reads its query's value;
// out of range reads 0.
template <int R, int MF>
TILES_DEV void load_vec(rv_col<R, MF>& v, const gview<4>& g, int row0) {
  const int lane = (int)arch::lane_id();
#pragma unroll
  for (int j = 0; j < R / MF; ++j) {
    const int r = row0 + j * MF + lane % MF;
    const u32 off = r < g.cols ? (u32)(r * 4) : arch::kOob;
    v.v[j] = __builtin_bit_cast(float, arch::buffer_load_b32(g.r, off));
  }
}

// ------------------------------------------------------------------ attention backward dK/dV (rt.h rt_rp)
// The transposing stage's registers also hold the tile row by row (thread t: KR whole 16-byte row
// vectors), so one global load feeds both LDS tiles: this writes them untransposed (KT x NT, rows
// contiguous) as KR ds_write_b128 per pass, next to store_stage_t's transposed copy.
template <class ST, int KT, int NT, int KR, int THREADS>
TILES_DEV void store_stage_t_rows(u32 lds, const stage_t<KT, NT, KR, THREADS>& s, u32 tid) {
  static_assert(ST::rows == KT && ST::cols == NT, "row-major LDS tile must be KT x NT");
#pragma unroll
  for (int p = 0; p < s.n; ++p) {
    const int t = (int)tid + p * THREADS, kg = t % s.groups, nv = t / s.groups;
#pragma unroll
    for (int q = 0; q < KR; ++q) arch::lds_write_b128(lds + ST::offset(kg * KR + q, nv * 8), s.v[p][q]);
  }
}
// Load a lane-spread per-row vector (rt.h rv_lane: lane l holds rows row0 + l, row0 + 64 + l, ...) from a
// 1-D f32 view (OPS `load` into a vec, e.g. LSE and Delta): one buffer_load_dword per 64 rows; out of range
// reads 0 (lanes past a 32-row vector read rows it does not have: never used).
template <int R, int MF>
TILES_DEV void load_vec(rv_lane<R, MF>& v, const gview<4>& g, int row0) {
  const int lane = (int)arch::lane_id();
#pragma unroll
  for (int j = 0; j < rv_lane<R, MF>::n; ++j) {
    const int r = row0 + j * 64 + lane;
    v.v[j] = __builtin_bit_cast(float, arch::buffer_load_b32(g.r, r < g.cols ? (u32)(r * 4) : arch::kOob));
  }
}

// acc += A B^T with the A operand (RA x K) streamed from an LDS tile in CR x CK chunks, double-buffered:
// chunk c+1's ds_reads are in flight while chunk c's MFMAs run, so two chunks of registers are live
// instead of the whole operand. PERM: A rows in key_perm order (load_op_perm; CR a multiple of 32).
// LGKM: the lowering's lgkmcnt for "chunk c has landed, chunk c+1 may be in flight" (schedule.waitcnt_for
// over the reads of the two chunks); checked here against the chunk shape.
template <class ST, bool PERM, int CR, int CK, int LGKM, dt T, int RA, int RB, int K, int MF>
TILES_DEV void mma_ABt_lds(rt_acc<RA, RB, MF>& acc, u32 lds, const rt_op<RB, K, MF>& b) {
  typedef rt_op<CR, CK, MF> chunk_t;
  constexpr int nk = K / CK, n = (RA / CR) * nk;
  static_assert(RA % CR == 0 && K % CK == 0 && (!PERM || CR % 32 == 0), "chunks must tile the operand");
  static_assert(n == 1 || LGKM == chunk_t::rb * chunk_t::kb, "lgkmcnt must leave exactly the next chunk in flight");
  chunk_t a[2];
  if constexpr (PERM) load_op_perm<ST>(a[0], lds, 0, 0);
  else load_op<ST>(a[0], lds, 0, 0);
#pragma unroll
  for (int c = 0; c < n; ++c) {
    if (c + 1 < n) {
      const int r0 = ((c + 1) / nk) * CR, k0 = ((c + 1) % nk) * CK;
      if constexpr (PERM) load_op_perm<ST>(a[(c + 1) & 1], lds, r0, k0);
      else load_op<ST>(a[(c + 1) & 1], lds, r0, k0);
      arch::wait_lgkmcnt<LGKM>();
    } else {
      arch::wait_lgkmcnt<0>();
    }
    const int i0 = (c / nk) * chunk_t::rb, s0 = (c % nk) * chunk_t::kb;
#pragma unroll
    for (int i = 0; i < chunk_t::rb; ++i)
#pragma unroll
      for (int j = 0; j < RB / MF; ++j)
#pragma unroll
        for (int s = 0; s < chunk_t::kb; ++s) {
          if constexpr (MF == 32) acc.d[i0 + i][j] = arch::mfma32<T>(a[c & 1].c[i][s], b.c[j][s0 + s], acc.d[i0 + i][j]);
          else acc.d[i0 + i][j] = arch::mfma16<T>(a[c & 1].c[i][s], b.c[j][s0 + s], acc.d[i0 + i][j]);
        }
  }
}

}  // namespace tiles
