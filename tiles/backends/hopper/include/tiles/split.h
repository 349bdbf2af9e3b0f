// tiles/split.h — a pipelined loop cut into parts (the lowering's option split_tail; ir.LseMerge).
//
// A persistent walk of P programs on N SMs ends with a partial wave of P % N programs while the
// other SMs idle. The walk instead takes the first `whole` programs as they are and cuts each of
// the rest into `parts` ranges of its key blocks: units whole + t·parts + p. A part stores its
// output normalized by its own sum, and its log-sum-exp, into a workspace; <kernel>_merge
// combines a tile's parts afterwards. The rule for a part's range is tiles/core/split.py's.
#pragma once
#include "ops.h"

namespace tiles {

// unit -> (tile, part): the first `whole` units are whole tiles (part -1), then each later tile's parts
__device__ __forceinline__ void split_unit(int unit, int whole, int parts, int& tile, int& part) {
  if (unit < whole) {
    tile = unit, part = -1;
  } else {
    tile = whole + (unit - whole) / parts, part = (unit - whole) % parts;
  }
}

// [begin, end) narrowed to part `part` of `parts`: part·n/parts to (part+1)·n/parts of its n trips
__device__ __forceinline__ void split_range(int& begin, int& end, int part, int parts) {
  const int n = int_max(end - begin, 0), b = begin;
  begin = b + part * n / parts, end = b + (part + 1) * n / parts;
}

// One row of a split tile, by one warp: out[c] = Σ_p exp(lse_p − lse) o_p[c], lse = log Σ_p exp(lse_p),
// over `parts` parts at part_o + p·o_step and part_lse + p·lse_step. A part with lse = +inf saw no
// key and carries no weight, nor does one at -inf; a row no part saw keeps the whole kernel's
// convention: out 0, lse +inf; a NaN lse leaves the row NaN. tiles/core/split.py's merge_lse is
// the reference.
template <int C, typename U>
__device__ __forceinline__ void merge_parts(U* out, int ncols, float* lse, const float* part_o, long long o_step,
                                            const float* part_lse, int lse_step, int parts) {
  static_assert(C % 64 == 0, "a lane merges pairs of columns 64 apart");
  const float inf = __int_as_float(0x7f800000);
  float top = -inf;
  for (int p = 0; p < parts; ++p) {
    const float l = part_lse[p * lse_step];
    if (l != inf) top = fmaxf(top, l);
  }
  if (top == -inf) top = 0.f;  // every live part at lse -inf: weights exp(-inf) = 0, not exp(-inf + inf)
  float2 acc[C / 64];
#pragma unroll
  for (int j = 0; j < C / 64; ++j) acc[j] = make_float2(0.f, 0.f);
  float total = 0.f;
  const int lane = arch::lane_id();
  for (int p = 0; p < parts; ++p) {
    const float l = part_lse[p * lse_step];
    if (l == inf) continue;
    const float w = expf(l - top);
    total += w;
#pragma unroll
    for (int j = 0; j < C / 64; ++j) {
      const float2 x = *reinterpret_cast<const float2*>(part_o + p * o_step + 2 * lane + 64 * j);
      acc[j].x = fmaf(w, x.x, acc[j].x), acc[j].y = fmaf(w, x.y, acc[j].y);
    }
  }
  const float q = total > 0.f ? 1.f / total : 0.f;
  const bool pair_ok = (reinterpret_cast<unsigned long long>(out) % (2 * sizeof(U))) == 0;
#pragma unroll
  for (int j = 0; j < C / 64; ++j) {
    const int c = 2 * lane + 64 * j;
    const float2 x = make_float2(acc[j].x * q, acc[j].y * q);
    if (pair_ok && c + 1 < ncols) {
      *reinterpret_cast<typename pair_of<U>::type*>(out + c) = f2_to_pair<U>(x);
    } else {
      if (c < ncols) out[c] = arch::from_float<U>(x.x);
      if (c + 1 < ncols) out[c + 1] = arch::from_float<U>(x.y);
    }
  }
  // total is NaN where a part's lse was: the row stays NaN, as an unsplit row's would, not "saw no key"
  if (lane == 0) *lse = total > 0.f ? top + logf(total) : (total == 0.f ? inf : total);
}

}  // namespace tiles
