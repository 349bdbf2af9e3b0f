"""Session 25: the forward's S = Q Kᵀ issued as key-column parts, each its own wgmma group, so the row
maximum of the first parts is taken while the last part's wgmma still runs (the softmax waits on the
maximum: session 19's bounds put 14-17 % on it at D = 128).

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_split.py [check]

The launched non-causal D = 128 forward's generated source, edited (`edit`): the S wgmma becomes
PARTS wgmmas of 128 / PARTS keys (N = 64 or 32), each committed; the wait for S becomes one wait per
part, the column mask and the maximum's tree run on each part as it lands, and the quad's shuffles
and the running maximum once at the end. The maximum is exact in any order, so the output must be
the launched kernel's to the bit (checked before timing). `check` only compiles each variant (NVRTC)
and asserts no spill and no serialized wgmma: what the CPU machine can say.
Timed interleaved (hopper_gemm_tiles.timed) beside the launched kernel and SDPA's cuDNN backend, at
B·S = 16k tokens, H = 16, non-causal. `main` and `check` take any edits of the launched source
(bench/attention_softmax_edits.py, bench/attention_bounds.py). Measured: bench/hopper_notes.md,
session 25 (every variant here slower than launched).
"""
import dataclasses
import re
import sys

C = "(scale * 1.4426950408889634f)"

HELPERS = r"""
// ---- session 25 experiment (bench/attention_split.py): S in key-column parts, one wgmma group each
// Part I of P of a 64-row accumulator: pairs [I N/(4P), (I+1) N/(4P)) of the fragment are columns
// [I N/P, (I+1) N/P): the accumulator of an N/P-wide wgmma, in place.
template <int I, int P, int N> __device__ __forceinline__ float2 (&part_of(rt<float, 64, N>& t))[N / (4 * P)] {
  return *reinterpret_cast<float2 (*)[N / (4 * P)]>(&t.v[0][I * (N / (4 * P))]);
}
template <int I, int P, typename T, int RA, int K, int SWA, int N, int SWB>
__device__ __forceinline__ void mma_ABt_part(rt<float, 64, N>& acc, const st<T, RA, K, SWA>& a, int a_row0,
                                             const st<T, N, K, SWB>& b) {
  auto& d = part_of<I, P>(acc);
  arch::wgmma_touch(d);
  arch::wgmma_fence();
#pragma unroll
  for (int k = 0; k < K / 16; ++k)
    arch::wgmma_ss<N / P, T, 0, 0>::run(d, desc_kmajor(a, a_row0, k), desc_kmajor(b, I * (N / P), k), k > 0 ? 1 : 0);
}
template <int PENDING, int I, int P, int N> __device__ __forceinline__ void mma_wait_part(rt<float, 64, N>& acc) {
  arch::wgmma_wait<PENDING>();
  arch::wgmma_touch(part_of<I, P>(acc));
}
template <int I, int P, int N> __device__ __forceinline__ void mask_cols_part(rt<float, 64, N>& t, int col0, int limit, float value) {
  constexpr int W = N / P;
  if (col0 + (I + 1) * W <= limit) return;
  auto& d = part_of<I, P>(t);
  const int th = wg_thread();
#pragma unroll
  for (int p = 0; p < W / 4; ++p) {
    const int c = col0 + I * W + frag_col(th, p);
    if (c >= limit) d[p].x = value;
    if (c + 1 >= limit) d[p].y = value;
  }
}
// the quad's maximum of r (the four lanes of a quad hold a row's column pairs): issued before the next
// part's wait, the shuffles keep ptxas from sinking this part's tree below it
__device__ __forceinline__ void row_max_quad(float (&r)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    r[h] = fmaxf(r[h], arch::shfl_xor(r[h], 1));
    r[h] = fmaxf(r[h], arch::shfl_xor(r[h], 2));
  }
}
// the maximum of part I's values of each of the thread's two rows, folded into r (a tree inside the part)
template <int I, int P, int N> __device__ __forceinline__ void row_max_part(float (&r)[2], rt<float, 64, N>& t, bool first) {
  float q[2];
  constexpr int Q = N / (8 * P);  // pairs of one row in a part
  auto& d = part_of<I, P>(t);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float m[Q];
#pragma unroll
    for (int i = 0; i < Q; ++i) m[i] = fmaxf(d[h + 2 * i].x, d[h + 2 * i].y);
#pragma unroll
    for (int n = Q; n > 1; n = (n + 1) / 2)
#pragma unroll
      for (int i = 0; i < Q / 2; ++i)
        if (i < n / 2) m[i] = fmaxf(m[i], m[i + (n + 1) / 2]);
    q[h] = m[0];
  }
  row_max_quad(q);
#pragma unroll
  for (int h = 0; h < 2; ++h) r[h] = first ? q[h] : fmaxf(r[h], q[h]);
}
// ptxas sinks a part's tree below the next part's wait (it does not model how long the wait lasts)
// unless something it will not move code across stands between: pin = 1 (a __syncwarp) or
// 2 (a named barrier over the warpgroup's 128 threads, id 3 + cw: unused by this kernel)
template <int HOW> __device__ __forceinline__ void pin(float (&r)[2], int cw) {
  asm volatile("" : "+f"(r[0]), "+f"(r[1]));
  if constexpr (HOW == 1) __syncwarp();
  if constexpr (HOW == 2) arch::bar_sync(3 + cw, 128);
}
__device__ __forceinline__ void row_max_finish(rv<64>& v, const float (&r)[2], float scale, const rv<64>& init) {
#pragma unroll
  for (int h = 0; h < 2; ++h) v.v[0][h] = fmaxf(r[h] * scale, init.v[0][h]);
}
"""


def edit(src: str, parts: int, pin: int = 2) -> str:
    """The launched non-causal forward's source with S in `parts` key-column parts, each part's
    maximum pinned before the next part's wait by `pin` (0: nothing, 1: __syncwarp, 2: a named barrier)."""
    pat = re.compile(r"( *)mma_ABt\(s, S\.q, wg_row0, S\.kt\[pos\.stage\], false\);\n *mma_commit\(\);\n")
    if len(pat.findall(src)) != 2:
        raise RuntimeError("the S wgmma is not in the source twice (peeled first iteration and loop)")

    def issue_parts(m):
        pad = m.group(1)
        return "".join(f"{pad}mma_ABt_part<{i}, {parts}>(s, S.q, wg_row0, S.kt[pos.stage]);\n{pad}mma_commit();\n"
                       for i in range(parts))
    src = pat.sub(issue_parts, src)
    blk = re.compile(r"( *)mma_wait<(\d)>\(s\);\n( *if \(kb \+ 1 == kb_stop\) release\(S\.once_empty\[0\]\);[^\n]*\n)"
                     r" *mask_cols\(s, kb \* 128, K_shape1, -INFINITY\);\n( *// row_max[^\n]*\n)"
                     r" *" + re.escape(f"row_max_scaled<true>(m_new, s, {C}, m);") + "\n")
    if len(blk.findall(src)) != 2:
        raise RuntimeError("the wait / mask / maximum block is not in the source twice")

    def waits(m):
        pad, after, release, note = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        out = [note, f"{pad}float r_max[2];  // the thread's two rows' maximum over the parts landed so far\n"]
        for i in range(parts):
            out.append(f"{pad}mma_wait_part<{after + parts - 1 - i}, {i}, {parts}>(s);\n")
            if i == parts - 1:
                out.append(release)  # q is read by every part
            out.append(f"{pad}mask_cols_part<{i}, {parts}>(s, kb * 128, K_shape1, -INFINITY);\n")
            out.append(f"{pad}row_max_part<{i}, {parts}>(r_max, s, {'true' if i == 0 else 'false'});\n")
            if i < parts - 1 and pin:
                out.append(f"{pad}pin<{pin}>(r_max, cw);\n")
        out.append(f"{pad}row_max_finish(m_new, r_max, {C}, m);\n")
        return "".join(out)
    src = blk.sub(waits, src)
    anchor = "using namespace tiles;\n"
    assert src.count(anchor) == 1
    return src.replace(anchor, anchor + HELPERS, 1) + f"\n// session 25 experiment: S in {parts} parts\n"


# name -> the edit of the launched source it times
VARIANTS = {"split2": lambda src: edit(src, 2, 2), "split4": lambda src: edit(src, 4, 2),
            "split2_unpinned": lambda src: edit(src, 2, 0)}


def check(variants=VARIANTS):
    """CPU: each variant compiles through NVRTC with no spill and no serialized wgmma."""
    import pathlib
    import tempfile
    from test_attention_lower import _lower
    from test_compile import assert_no_spills
    from tiles.backends.hopper import runtime
    low = _lower(D=128, causal=False, launched=True)
    for name, fn in variants.items():
        c = runtime.compile_cuda(fn(low.source), name=f"{low.entry}_{name}.cu", cache=False)
        with tempfile.TemporaryDirectory() as d:
            assert_no_spills(c, low.entry, pathlib.Path(d))
        res = c.resources.get(low.entry)
        print(name, "compiled:", res, flush=True)


def launcher(W, attention_fwd, q, k, v, o, lse, variant=None, variants=VARIANTS):
    """A prepared launch of the launched forward, or of its source with the variant's edit: the edited
    Lowered goes into the lowering cache under an option of its own, which prepare then finds."""
    D = q.shape[-1]
    opts = W.schedule("attention_fwd", D, (q, k, v, o, lse, D ** -0.5)) or {}
    cfg = W.config("attention_fwd", D=D, causal=False, Sq=q.shape[1])
    base = W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=False, D=D, options=opts, **cfg)
    if variant is None:
        return base
    low = dataclasses.replace(base.lowered, source=variants[variant](base.lowered.source))
    key_opts = {**opts, "bound": variant}
    kid = next(key[0] for key, lw in W._lowered_cache.items() if lw is base.lowered)
    W._lowered_cache[(kid, tuple(sorted(key_opts.items())))] = low
    return W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=False, D=D, options=key_opts, **cfg)


def input_sets(B, S, H, D, n=3, o=None):
    """n sets of fresh random (q, k, v, o, lse) at B x S x H x D (bf16; lse fp32); `o`: one output
    tensor shared by every set."""
    import torch
    sets = []
    for i in range(n):
        g = torch.Generator(device="cuda").manual_seed(i)
        q, k, v = (torch.randn(B, S, H, D, device="cuda", generator=g).bfloat16() for _ in range(3))
        sets.append((q, k, v, torch.empty_like(q) if o is None else o, torch.empty(B, H, S, device="cuda")))
    return sets


def first_outputs(gos, sets):
    """{name: (O, LSE)} of each prepared launch list in gos run once on sets[0] (outputs poisoned first)."""
    import torch
    outs = {}
    for name, g in gos.items():
        sets[0][3].fill_(float("nan")), sets[0][4].fill_(float("nan"))
        g[0]()
        torch.cuda.synchronize()
        outs[name] = (sets[0][3].clone(), sets[0][4].clone())
    return outs


def cudnn_fn(sets):
    """fn(i): SDPA's cuDNN backend on set i % len(sets)."""
    import torch
    qt = [tuple(t.transpose(1, 2) for t in x[:3]) for x in sets]

    def cudnn(i):
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(*qt[i % len(qt)])
    return cudnn


def report(fns, flops, label, suite=False, rounds=9):
    """Times fns (hopper_gemm_tiles.timed back to back; with `suite` also the standard suite's timing)
    and prints each one's TFLOP/s and speed over fns["launched"]."""
    import hopper_gemm_tiles as ht
    runs = [("back to back", ht.timed(fns, rounds=rounds))]
    if suite:
        runs.append(("suite timing", ht.suite_timed(fns, 3)))
    for how, ms in runs:
        print(f"{label} {how}:", " ".join(f"{n}={flops / (t * 1e-3) / 1e12:.0f}({ms['launched'] / t:.3f})"
                                          for n, t in ms.items()), flush=True)


def main(variants=VARIANTS, exact=True, shapes=(1024, 4096, 16384), suite=False):
    """Each variant beside the launched kernel and cuDNN at S in `shapes` (B * S = 16k tokens, H = 16);
    `exact`: its output must be the launched one's to the bit (else the largest differences are
    printed); `suite`: timed in the standard suite's way too."""
    import torch
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.kernels import attention_fwd
    D, H = 128, 16
    for S in shapes:
        B = 16384 // S
        sets = input_sets(B, S, H, D)
        fns = {}
        for name in ("launched", *variants):
            gos = [launcher(W, attention_fwd, *x, variant=None if name == "launched" else name, variants=variants)
                   for x in sets]
            fns[name] = lambda i, gos=gos: gos[i % 3]()
        # the same bits as launched: run each on set 0 and compare O and the LSE
        ref = None
        for name in ("launched", *variants):
            sets[0][3].zero_(), sets[0][4].zero_()
            fns[name](0)
            torch.cuda.synchronize()
            got = (sets[0][3].clone(), sets[0][4].clone())
            if ref is None:
                ref = got
            elif not exact or not (torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])):
                print(f"S={S} {name}: {'differs from' if exact else 'against'} launched: max |dO| "
                      f"{(got[0].float() - ref[0].float()).abs().max().item():.3g}, max |dLSE| "
                      f"{(got[1] - ref[1]).abs().max().item():.3g}", flush=True)
            else:
                print(f"S={S} {name}: bitwise equal to launched", flush=True)
        fns["sdpa_cudnn"] = cudnn_fn(sets)
        report(fns, 4 * B * H * S * S * D, f"D={D} S={S} B={B}", suite)


if __name__ == "__main__":
    check() if sys.argv[1:] == ["check"] else main()
