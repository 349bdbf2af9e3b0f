"""Session 25: two changes to the D = 128 forward's softmax, as edits of the launched non-causal
source (timed by bench/attention_split.py's harness, beside the launched kernel and cuDNN):

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_softmax_edits.py [check]

* `skip`: O's rescale skipped where no row of the warp changed its maximum (alpha = 1 in every lane:
  exp2(0) is 1 exactly, so the output is the same to the bit). The rows of a warp are its own: a
  warp's vote needs no other warp. Session 19's bound put 2.6 % on the rescale.
* `polyN`: one element in N of the exponentials taken on the FMA pipe (a degree-3 polynomial for
  2^f on [-1/2, 1/2], the exponent added to the bits), the rest on MUFU.EX2, whose 16 lanes a clock
  an SM are the softmax's narrowest pipe (FlashAttention-4's split, here on Hopper). Relative error
  1.8e-4 where P is then rounded to bf16 (3.9e-3): the output changes in its rounding.
"""
import sys

import attention_split as split

C = "(scale * 1.4426950408889634f)"

POLY = r"""
// ---- session 25 experiment (bench/attention_softmax_edits.py): 2^x on the FMA pipe, x <= 0
__device__ __forceinline__ float exp2_fma(float x) {
  x = fmaxf(x, -126.f);                        // 2^-126 and below: the bf16 P rounds them to nothing that counts
  const float y = x + 12582912.f;              // 1.5 * 2^23: y's low mantissa bits hold round(x)
  const float f = x - (y - 12582912.f);        // in [-1/2, 1/2]
  const float p = fmaf(fmaf(fmaf(0.05460262f, f, 0.24192413f), f, 0.69331648f), f, 1.f);
  return __int_as_float(__float_as_int(p) + (__float_as_int(y) << 23));  // 2^round(x) into the exponent
}
template <int EVERY, int R, int C>
__device__ __forceinline__ void exp2_scaled_row_mixed(rt<float, R, C>& d, const rt<float, R, C>& t, float scale, const rv<R>& v) {
#pragma unroll
  for (int s = 0; s < d.slices; ++s)
#pragma unroll
    for (int p = 0; p < d.pairs; ++p) {
      const float y = v.v[s][p & 1];
      const float a = fmaf(t.v[s][p].x, scale, -y), b = fmaf(t.v[s][p].y, scale, -y);
      // element 2p + 1 of every EVERY / 2 pairs on the FMA pipe
      d.v[s][p] = make_float2(arch::exp2(a), (p % (EVERY / 2) == 0) ? exp2_fma(b) : arch::exp2(b));
    }
}
"""


def _once(src, old, new, count):
    if src.count(old) != count:
        raise RuntimeError(f"{old!r} is not in the launched source {count} times")
    return src.replace(old, new)


def skip(src):
    return _once(src, "        mul_row(o, o, alpha);\n",
                 "        if (__any_sync(0xffffffffu, alpha.v[0][0] != 1.f || alpha.v[0][1] != 1.f)) "
                 "mul_row(o, o, alpha);  // no row of the warp moved: alpha = 1\n", 2)


def poly(every):
    def ed(src):
        src = _once(src, f"exp2_scaled_row(s, s, {C}, m_new);", f"exp2_scaled_row_mixed<{every}>(s, s, {C}, m_new);", 2)
        return _once(src, "using namespace tiles;\n", "using namespace tiles;\n" + POLY, 1)
    return ed


VARIANTS = {"skip": skip, "poly8": poly(8), "poly4": poly(4), "skip_poly8": lambda s: poly(8)(skip(s))}

if __name__ == "__main__":
    split.check(VARIANTS) if sys.argv[1:] == ["check"] else split.main(VARIANTS, exact=False)
