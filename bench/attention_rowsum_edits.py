"""Session 29: the D = 128 forward's row sum taken out of the softmax, as edits of the launched
non-causal source (timed by bench/attention_split.py's harness, beside the launched kernel and cuDNN):

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_rowsum_edits.py [all] [check]

Session 25 found that every reshaping of the softmax that adds instructions loses, and that the
launched one issues the fewest. These edits take instructions out instead:

* `quad_end` (first call, edited from the source launched then): each thread keeps its own part of a
  row's sum (its 32 columns of the row), rescaled by alpha like the whole sum, and the quad's two
  shuffles run once a program instead of once a block. The same sum in another order: the output
  changes in its rounding. Launched since (option quad_sums); `per_block` now edits it back, and
  `tree` adds a lane's values of a row pairwise (a tree) instead of as a chain.
* `mma8`: the row sum on the tensor cores. P times a 128 x 8 tile of ones (one m64n8k16 wgmma a k-step,
  eight a block, in the same burst as P V) puts every row's sum of the bf16 P in each of 8 accumulator
  columns; those are rescaled with O and read out at the end. The 64 FADDs and 4 shuffles a block
  leave the softmax, for 1/16 more tensor work in P V (n8 beside n128). The normaliser is then the
  sum of the P that V was multiplied by (its bf16 rounding), not of the fp32 exponentials.
  The ones tile is 512 bytes: every k-step's descriptor points at the same two core matrices (no
  swizzle), since all of B is ones. 224 KB of stages leave about 1 KB of shared memory.
"""
import sys

import attention_split as split

TREE = r"""
// ---- session 29 experiment (bench/attention_rowsum_edits.py): a lane's part of the row sum as a tree
template <int R, int C>
__device__ __forceinline__ void row_sum_partial_tree(rv<R>& v, const rt<float, R, C>& t, const rv<R>& init) {
  constexpr int N = rt<float, R, C>::pairs / 2;  // pairs of one row in a slice
#pragma unroll
  for (int s = 0; s < t.slices; ++s)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float a[N];
#pragma unroll
      for (int i = 0; i < N; ++i) a[i] = t.v[s][h + 2 * i].x + t.v[s][h + 2 * i].y;
#pragma unroll
      for (int n = N; n > 1; n = (n + 1) / 2)
#pragma unroll
        for (int i = 0; i < N / 2; ++i)
          if (i < n / 2) a[i] += a[i + (n + 1) / 2];
      v.v[s][h] = a[0] + init.v[s][h];
    }
}
"""

ONES = r"""
// ---- session 29 experiment (bench/attention_rowsum_edits.py): the row sum as P times a tile of ones
// m64n8k16, A (P) from registers, B K-major without swizzle: two 8 x 8 core matrices of bf16, 128
// bytes apart along K (LBO) and, there being one 8-row group, any SBO (128 too).
__device__ __forceinline__ void wgmma_rs_n8(float2 (&d)[2], const u32 (&a)[4], u64 desc_b) {
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, 1, 0;\n"
               " wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n}\n"
               : "+f"(d[0].x), "+f"(d[0].y), "+f"(d[1].x), "+f"(d[1].y)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}
template <int K>
__device__ __forceinline__ void mma_row_sum(rt<float, 64, 8>& lacc, const rt<bf16, 64, K>& p, const bf16* ones) {
  const u64 desc = desc_field(arch::smem_addr(ones)) | (desc_field(128) << 16) | (desc_field(128) << 32);
  mma_fence(lacc);
#pragma unroll
  for (int k = 0; k < K / 16; ++k) wgmma_rs_n8(lacc.v[0], reinterpret_cast<const u32(&)[4]>(p.v[0][4 * k]), desc);
}
// l = the row sums the wgmmas left in every column: pair 0 is the thread's first row, pair 1 its second
__device__ __forceinline__ void row_sum_from(rv<64>& l, const rt<float, 64, 8>& lacc) {
  l.v[0][0] = lacc.v[0][0].x, l.v[0][1] = lacc.v[0][1].x;
}
"""


def _once(src, old, new, count):
    if src.count(old) != count:
        raise RuntimeError(f"{old!r} is not in the launched source {count} times")
    return src.replace(old, new)


def _helpers(src, text):
    return _once(src, "using namespace tiles;\n", "using namespace tiles;\n" + text, 1)


PARTIAL_LINE = "        row_sum_partial(l, s, l);  // this lane's columns: the quad's lanes are added after the loop\n"
FINISH_LINE = "      row_sum_finish(l);  // the quad's four lanes' parts of each row's sum\n"


def per_block(src):
    """The form launched before session 29 (quad_sums off): the quad's shuffles in every block."""
    src = _once(src, PARTIAL_LINE, "        row_sum(l, s, l);\n", 2)
    return _once(src, FINISH_LINE, "", 1)


def tree(src):
    return _helpers(_once(src, "row_sum_partial(l, s, l);", "row_sum_partial_tree(l, s, l);", 2), TREE)


def mma8(src):
    src = _once(src, "  barrier once_empty[1];", "  alignas(128) bf16 ones[256];  // 512 bytes of 1.0: B of the row sum's wgmmas\n"
                "  barrier once_empty[1];", 1)
    src = _once(src, "  __syncthreads();\n",
                "  for (int i = threadIdx.x; i < 256; i += blockDim.x) S.ones[i] = bf16{0x3F80};  // 1.0\n"
                "  arch::fence_proxy_async();  // the wgmmas read them through the async proxy\n  __syncthreads();\n", 1)
    src = _once(src, "    rt<float, WG_ROWS, 128> o;", "    rt<float, WG_ROWS, 8> lacc;  // every column: the row's sum of P\n"
                "    rt<float, WG_ROWS, 128> o;", 1)
    src = _once(src, "      fill(l, 0.0f);\n", "      fill(l, 0.0f);\n      fill(lacc, 0.0f);\n", 1)
    src = _once(src, "        mul(l, l, alpha);\n", "", 2)
    src = _once(src, PARTIAL_LINE, "", 2)
    src = _once(src, FINISH_LINE, "", 1)
    src = _once(src, "        mul_row(o, o, alpha);\n", "        mul_row(o, o, alpha);\n        mul_row(lacc, lacc, alpha);\n", 2)
    src = _once(src, "mma_AB(o, p, S.vt[held], true);\n", "mma_AB(o, p, S.vt[held], true), mma_row_sum(lacc, p, S.ones);\n", 2)
    src = _once(src, "mma_wait<0>(o);\n", "mma_wait<0>(o, lacc);\n", 2)
    src = _once(src, "      div_row(o, o, l);\n", "      row_sum_from(l, lacc);\n      div_row(o, o, l);\n", 1)
    return _helpers(src, ONES)


# mma8 ran in the first call only (0.92-0.96x); `all` times it again
VARIANTS = {"per_block": per_block, "tree": tree}
if sys.argv[1:2] == ["all"]:
    VARIANTS["mma8"] = mma8
    sys.argv.pop(1)

if __name__ == "__main__":
    split.check(VARIANTS) if sys.argv[1:] == ["check"] else split.main(VARIANTS, exact=False)
