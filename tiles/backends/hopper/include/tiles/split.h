// tiles/split.h — a pipelined loop cut into parts (the lowering's option split_tail; ir.LseMerge).
//
// A persistent walk of P programs on N SMs ends with a partial wave of P % N programs while the
// other SMs idle. The walk instead takes the first `whole` programs as they are and cuts the rest:
// each into `parts` ranges of its key blocks, or all of them, end to end, into one equal share a CTA
// (split_plan). A part stores its output normalized by its own sum, and its log-sum-exp, into a
// workspace; <kernel>_merge combines a tile's parts afterwards. The rules for a part's range are
// tiles/core/split.py's.
#pragma once
#include "ops.h"

namespace tiles {

// The launcher's plan (core/split.py plan_tail). The tail is either cut into `parts` parts of each program
// (shares == 0: units whole + t·parts + p), or, stream-K's way, its programs' trips are laid end to end
// and cut into `shares` equal shares, one a CTA (each program running `trips` trips). A share is shorter
// than a program, so it touches two at most: share b is the walk's units whole + b (where it starts)
// and whole + shares + b (where it runs on into the next program; empty otherwise). Unit u's results
// go to workspace slot u − whole.
struct split_plan {
  int whole, parts, shares, trips;

  // the workspace's slots: a part each, or two a share
  __device__ __forceinline__ int slots(int programs) const { return shares ? 2 * shares : (programs - whole) * parts; }
  // The end of CTA `cta`'s walk (units cta, cta + gridDim.x, ... below it; with shares, the grid is the
  // shares): it stops before a share's second unit where the share ends inside its first program, and
  // before an empty share's first. So no unit is empty, and the walk needs no branch around one (a
  // `continue` there made ptxas serialize the wgmmas, C7519).
  __device__ __forceinline__ int units_of(int cta, int programs) const {
    if (!shares) return whole + (programs - whole) * parts;
    const int L = share_begin(cta, programs), H = share_begin(cta + 1, programs);
    if (L == H) return whole + cta;
    return H > (L / trips + 1) * trips ? whole + shares + cta + 1 : whole + cta + 1;
  }
  // first trip of share b, over the tail's trips end to end
  __device__ __forceinline__ int share_begin(int b, int programs) const {
    return int((long long)b * (programs - whole) * trips / shares);
  }
  // the share holding trip i of the tail
  __device__ __forceinline__ int owner(int i, int programs) const {
    int b = int((long long)i * shares / ((long long)(programs - whole) * trips));
    while (b + 1 < shares && share_begin(b + 1, programs) <= i) ++b;
    while (share_begin(b, programs) > i) --b;
    return b;
  }
};

// unit -> (tile, part, its trips [lo, hi) of den): whole tiles (part -1), then the tail's parts or shares
// (units_of keeps the walk to units with work).
__device__ __forceinline__ void split_unit(int unit, const split_plan& sp, int programs, int& tile, int& part,
                                           int& lo, int& hi, int& den) {
  if (unit < sp.whole) {
    tile = unit, part = -1;
    return;
  }
  part = unit - sp.whole;
  if (!sp.shares) {
    tile = sp.whole + part / sp.parts, lo = part % sp.parts, hi = lo + 1, den = sp.parts;
    return;
  }
  const int b = part % sp.shares, second = part / sp.shares;
  const int L = sp.share_begin(b, programs), H = sp.share_begin(b + 1, programs), t0 = L / sp.trips;
  const int next = (t0 + 1) * sp.trips;  // the first trip of the program after the one the share starts in
  tile = sp.whole + t0 + second, den = sp.trips;
  lo = second ? 0 : L - t0 * sp.trips, hi = second ? H - next : int_min(sp.trips, H - t0 * sp.trips);
}

// [begin, end) narrowed to trips lo·n/den to hi·n/den of its n trips (a part: lo = p, hi = p + 1 of
// den = parts; a share: den = trips = n, so lo and hi themselves)
__device__ __forceinline__ void split_range(int& begin, int& end, int lo, int hi, int den) {
  const int n = int_max(end - begin, 0), b = begin;
  begin = b + lo * n / den, end = b + hi * n / den;
}

// The workspace slots of tail program t's parts, in trip order: parts t·parts .. t·parts + parts − 1;
// or the shares from the one holding its first trip to the one holding its last, the first of them
// through its second unit where it started in the program before (slot shares + b), empty shares
// skipped (slot −1).
struct split_slots {
  int first, count, carried, shares;
  long long span;  // the tail's trips end to end (shares)

  __device__ __forceinline__ split_slots(const split_plan& plan, int programs, int t)
      : shares(plan.shares), span((long long)(programs - plan.whole) * plan.trips) {
    if (!shares) {
      first = t * plan.parts, count = plan.parts, carried = 0;
      return;
    }
    const int lo = t * plan.trips;
    first = plan.owner(lo, programs);
    count = plan.owner(lo + plan.trips - 1, programs) - first + 1;
    carried = plan.share_begin(first, programs) < lo;
  }
  __device__ __forceinline__ int slot(int p) const {
    if (!shares) return first + p;
    const int b = first + p;
    if (b * span / shares == (b + 1) * span / shares) return -1;  // share_begin(b) == share_begin(b + 1)
    return p == 0 && carried ? shares + b : b;
  }
};

// One row of a split tile, by one warp: out[c] = Σ_p exp(lse_p − lse) o_p[c], lse = log Σ_p exp(lse_p),
// over the parts in workspace slots slots.slot(p), p < slots.count (−1: none), at part_o + slot·o_step and
// part_lse + slot·lse_step. A part with lse = +inf saw no key and carries no weight; a row no part saw
// keeps the whole kernel's convention: out 0, lse +inf.
template <int C, typename U>
__device__ __forceinline__ void merge_parts(U* out, int ncols, float* lse, const float* part_o, long long o_step,
                                            const float* part_lse, int lse_step, const split_slots& slots) {
  static_assert(C % 64 == 0, "a lane merges pairs of columns 64 apart");
  const float inf = __int_as_float(0x7f800000);
  float top = -inf;
  for (int p = 0; p < slots.count; ++p) {
    const int s = slots.slot(p);
    const float l = s < 0 ? inf : part_lse[s * lse_step];
    if (l != inf) top = fmaxf(top, l);
  }
  float2 acc[C / 64];
#pragma unroll
  for (int j = 0; j < C / 64; ++j) acc[j] = make_float2(0.f, 0.f);
  float total = 0.f;
  const int lane = arch::lane_id();
  for (int p = 0; p < slots.count; ++p) {
    const int s = slots.slot(p);
    const float l = s < 0 ? inf : part_lse[s * lse_step];
    if (l == inf) continue;
    const float w = expf(l - top);
    total += w;
#pragma unroll
    for (int j = 0; j < C / 64; ++j) {
      const float2 x = *reinterpret_cast<const float2*>(part_o + s * o_step + 2 * lane + 64 * j);
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
  if (lane == 0) *lse = total > 0.f ? top + logf(total) : inf;
}

}  // namespace tiles
