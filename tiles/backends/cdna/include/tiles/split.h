// tiles/split.h — a pipelined loop cut into parts (ir.LseMerge), for grids shorter than the chip.
//
// At decode a grid has a few programs (one per key / value head and sequence) against 304 CUs
// (MI300X) or 256 (MI355X). The launcher then runs each program as `parts` work-groups, each over
// its own range of key blocks. A part stores its output normalized by its own sum, and its
// log-sum-exp, in f32 into a workspace laid out as the outputs with a leading parts axis, and
// <kernel>_merge combines them. The rule for a part's range is tiles/core/split.py's; so is the
// merge's (merge_lse), which the tests hold this one to.
#pragma once
#include "arch.h"

namespace tiles {

// [begin, end) narrowed to part `part` of `parts`: part·n/parts to (part+1)·n/parts of its n trips
TILES_DEV void split_range(int& begin, int& end, int part, int parts) {
  const int n = end > begin ? end - begin : 0, b = begin;
  begin = b + part * n / parts, end = b + (part + 1) * n / parts;
}

// One output element (row, column c) of a split program: out = Σ_p exp(lse_p − lse) o_p[c], lse =
// log Σ_p exp(lse_p), over the parts at part_o + p·o_step and part_lse + p·lse_step. A part with
// lse = +inf saw no key and carries no weight; a row no part saw keeps the whole kernel's convention
// (out 0, lse +inf); a NaN lse leaves the row NaN. Every column of a row recomputes the row's
// weights from the parts' LSEs, so that one pass over the workspace does the merge.
template <dt OUT, class U>
TILES_DEV void merge_element(U* out, float* lse, const float* part_o, long long o_step, const float* part_lse,
                             long long lse_step, int parts) {
  const float inf = __builtin_inff();
  float top = -inf;
  for (int p = 0; p < parts; ++p) {
    const float l = part_lse[p * lse_step];
    if (l != inf) top = l > top ? l : top;  // skips NaN, as fmaxf does
  }
  if (top == -inf) top = 0.f;  // every live part at lse -inf: weights exp(-inf) = 0, not exp(-inf + inf)
  constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;
  float acc = 0.f, total = 0.f;
  for (int p = 0; p < parts; ++p) {
    const float l = part_lse[p * lse_step];
    if (l == inf) continue;
    const float w = arch::exp2((l - top) * LOG2E);
    total += w;
    acc += w * part_o[p * o_step];
  }
  // total is NaN where a part's lse was: the row stays NaN (acc · 0 included), as an unsplit row's
  // would, not "saw no key"
  const float x = acc * (total > 0.f ? 1.f / total : 0.f);
  if constexpr (OUT == dt::f32) *out = x;
  else *out = OUT == dt::bf16 ? arch::f32_to_bf16(x) : arch::f32_to_f16(x);
  if (lse) *lse = total > 0.f ? top + arch::log2(total) * LN2 : (total == 0.f ? inf : total);
}

}  // namespace tiles
