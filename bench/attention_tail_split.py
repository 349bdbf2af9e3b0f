"""Session 31: the D = 128 forward's last wave split along the keys (an edit of the launched
non-causal source, to measure the lever before building it into the lowering).

bench/attention_waves.py found that 2112 query tiles (16 whole waves on 132 SMs) run 2.0-2.9 %
faster per FLOP than the standard shapes' 2048 (15.5 waves), for tiles and cuDNN alike, in the
suite's timing. Here the first WHOLE = 15 x 132 tiles run as launched and each of the other 68 is
cut into R = 3 parts of its key blocks (204 units: every CTA takes one, 72 take two, so the walk ends
after 15 2/3 tile-times instead of 16). A part stores its O normalized by its own row sums, in fp32,
and its LSE into a workspace (a __device__ pointer set through the module); the parts are merged
afterwards (O = sum_i exp(L_i - L) O_i, L = logsumexp_i L_i; in torch here, timed on its own: a
merge kernel, or the last part's CTA, would do it in the library).

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_tail_split.py [check]
"""
import ctypes
import dataclasses
import sys

import attention_split as split

R = 3

MERGE = r"""
// The parts' merge (session 31 experiment): one warp a row of a split tile, four columns a lane.
// O = sum_i exp(L_i - L) O_i and L = log sum_i exp(L_i), the parts' O normalized by their own sums.
__device__ __forceinline__ unsigned short bf16_bits(float x) {  // round to nearest even
  unsigned u = __float_as_uint(x);
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
extern "C" __global__ void __launch_bounds__(128) tail_merge(const float* __restrict__ ws, int parts, int whole,
    int grid0, int H, unsigned short* __restrict__ O, float* __restrict__ L, long long os0, long long os1,
    long long os2, long long ls0, long long ls1) {
  const int r = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x % 32;
  const int t = r / 128, i = r % 128, tile = whole + t;
  const int pid0 = grid0 - 1 - tile % grid0, pid1 = tile / grid0 % H, pid2 = tile / grid0 / H;
  const float* lp = ws + (long long)parts * 128 * 128 + (long long)t * R * 128 + i;
  float lse[R], mx = -__int_as_float(0x7f800000);
#pragma unroll
  for (int p = 0; p < R; ++p) lse[p] = lp[p * 128], mx = fmaxf(mx, lse[p]);
  float w[R], sum = 0.0f;
#pragma unroll
  for (int p = 0; p < R; ++p) w[p] = __expf(lse[p] - mx), sum += w[p];
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int p = 0; p < R; ++p) {
    const float4 x = reinterpret_cast<const float4*>(ws + ((long long)(t * R + p) * 128 + i) * 128)[lane];
    const float c = w[p] / sum;
    acc.x += c * x.x, acc.y += c * x.y, acc.z += c * x.z, acc.w += c * x.w;
  }
  const long long row = pid0 * 128 + i;
  unsigned short* o = O + pid2 * os0 + row * os1 + pid1 * os2 + lane * 4;
  uint2 packed = make_uint2(bf16_bits(acc.x) | (unsigned)bf16_bits(acc.y) << 16, bf16_bits(acc.z) | (unsigned)bf16_bits(acc.w) << 16);
  *reinterpret_cast<uint2*>(o) = packed;
  if (lane == 0) L[pid2 * ls0 + pid1 * ls1 + row] = mx + logf(sum);
}
""".replace("R]", f"{R}]").replace("p < R", f"p < {R}").replace("t * R", f"t * {R}")


def _once(src, old, new, count=1):
    if src.count(old) != count:
        raise RuntimeError(f"{old!r} is in the launched source {src.count(old)} times, not {count}")
    return src.replace(old, new)


HELPERS = r"""
// ---- session 31 experiment (bench/attention_tail_split.py): the last wave's tiles in key parts
constexpr int TAIL_R = %d;
__device__ float* tail_ws;  // parts' O (128 x 128 fp32 each), then their LSE (128 each)
// unit -> query tile and key-block range; part < 0: a whole tile
__device__ __forceinline__ void tail_unit(int prog, int whole, int nk, int& tile, int& kb0, int& kb1, int& part) {
  if (prog < whole) { tile = prog, kb0 = 0, kb1 = nk, part = -1; return; }
  const int u = prog - whole;
  tile = whole + u / TAIL_R, part = u %% TAIL_R;
  kb0 = part * nk / TAIL_R, kb1 = (part + 1) * nk / TAIL_R;
}
"""

PID = "const int pid0 = grid0 - 1 - prog % grid0, pid1 = prog / grid0 % grid1, pid2 = prog / grid0 / grid1;"
NEW_PID = ("int tile, kb0, kb1, part; tail_unit(prog, whole, ceil_div(K_shape1, 128), tile, kb0, kb1, part); (void)part;\n"
           "        const int pid0 = grid0 - 1 - tile % grid0, pid1 = tile / grid0 % grid1, pid2 = tile / grid0 / grid1;")


def edit(src, whole):
    src = _once(src, "using namespace tiles;\n", "using namespace tiles;\n" + HELPERS % R)
    src = _once(src, "  const int programs = grid0 * grid1 * grid2;",
                f"  const int programs = grid0 * grid1 * grid2, whole = {whole};\n"
                "  const int units = whole + (programs - whole) * TAIL_R, tail_parts = (programs - whole) * TAIL_R;\n"
                "  (void)tail_parts;")
    src = _once(src, "prog < programs; prog += gridDim.x, ++it) {", "prog < units; prog += gridDim.x, ++it) {", 2)
    src = _once(src, PID, NEW_PID, 2)
    src = _once(src, "for (int kb = 0; kb < ceil_div(K_shape1, 128); ++kb) {", "for (int kb = kb0; kb < kb1; ++kb) {")
    src = _once(src, "const int kb_stop = ceil_div(K_shape1, 128);", "const int kb_stop = kb1;")
    src = _once(src, "if (0 < kb_stop) {", "if (kb0 < kb_stop) {")
    src = _once(src, "        const int kb = 0;\n", "        const int kb = kb0;\n")
    src = _once(src, "for (int kb = 1; kb < kb_stop; ++kb) {", "for (int kb = kb0 + 1; kb < kb_stop; ++kb) {")
    src = _once(src, "if (kb_stop <= 0) release(S.once_empty[0]);", "if (kb_stop <= kb0) release(S.once_empty[0]);")
    src = _once(src, "      store(O + pid2 * O_stride0", "      if (part >= 0) store(tail_ws + (long long)(prog - whole) * 128 * 128, 128LL, 128, 128, o, wg_row0, 0);\n"
                "      else store(O + pid2 * O_stride0")
    src = _once(src, "      store(L + pid2 * L_stride0", "      if (part >= 0) store(tail_ws + (long long)tail_parts * 128 * 128 + (prog - whole) * 128, 1LL, 128, alpha, wg_row0);\n"
                "      else store(L + pid2 * L_stride0")
    return src


def launch(W, attention_fwd, q, k, v, o, lse, sms, ws):
    """(go, merge): the edited kernel's launch on these tensors and the parts' merge, through the
    workspace ws (one for every set: the pointer lives in the module, which the sets share)."""
    import torch
    from cuda.bindings import driver as cu
    D = q.shape[-1]
    B, S, H, _ = q.shape
    programs = B * H * (S // 128)
    whole = programs // sms * sms
    if whole == programs:
        raise ValueError("no partial wave at this shape")
    base = split.launcher(W, attention_fwd, q, k, v, o, lse)
    opts = W.schedule("attention_fwd", D, (q, k, v, o, lse, D ** -0.5)) or {}
    cfg = W.config("attention_fwd", D=D, causal=False, Sq=S)
    low = dataclasses.replace(base.lowered, source=edit(base.lowered.source, whole))
    key_opts = {**opts, "bound": f"tail{whole}"}
    kid = next(key[0] for key, lw in W._lowered_cache.items() if lw is base.lowered)
    W._lowered_cache[(kid, tuple(sorted(key_opts.items())))] = low
    go = W.prepare(attention_fwd, q, k, v, o, lse, D ** -0.5, causal=False, D=D, options=key_opts, **cfg)
    kern = W._kernel_cache[(id(go.lowered), torch.cuda.current_device())]
    parts = (programs - whole) * R
    assert ws.numel() >= parts * 128 * 129
    err, ptr, size = cu.cuModuleGetGlobal(kern.module, b"tail_ws")
    assert err == cu.CUresult.CUDA_SUCCESS and size == 8, (err, size)
    val = ctypes.c_uint64(ws.data_ptr())
    (err,) = cu.cuMemcpyHtoD(ptr, ctypes.addressof(val), 8)
    assert err == cu.CUresult.CUDA_SUCCESS, err
    grid0 = S // 128
    tiles_ = torch.arange(whole, programs, device="cuda")
    pid0, pid1, pid2 = grid0 - 1 - tiles_ % grid0, tiles_ // grid0 % H, tiles_ // grid0 // H
    rows = (pid0[:, None] * 128 + torch.arange(128, device="cuda")[None, :])  # (T, 128)
    Op = ws[:parts * 128 * 128].view(-1, R, 128, D)
    Lp = ws[parts * 128 * 128:].view(-1, R, 128)

    from tiles.backends.hopper import runtime
    mk = runtime.load(runtime.compile_cuda(MERGE, name="tail_merge.cu").cubin, "tail_merge")
    T = programs - whole
    margs = [runtime.arg_ptr(ws), runtime.arg_i32(parts), runtime.arg_i32(whole), runtime.arg_i32(grid0),
             runtime.arg_i32(H), runtime.arg_ptr(o), runtime.arg_ptr(lse), *(runtime.arg_i64(x) for x in o.stride()[:3]),
             *(runtime.arg_i64(x) for x in lse.stride()[:2])]
    assert lse.stride(2) == 1 and o.stride(3) == 1

    def merge_kernel():
        mk.launch((T * 128 // 4, 1, 1), (128, 1, 1), margs)

    def merge():
        Lt = torch.logsumexp(Lp, dim=1)  # (T, 128)
        w = torch.exp(Lp - Lt[:, None])
        Ot = (w[..., None] * Op).sum(1)  # (T, 128, D)
        o[pid2[:, None], rows, pid1[:, None]] = Ot.to(o.dtype)
        lse[pid2[:, None], pid1[:, None], rows] = Lt
    return go, merge, merge_kernel


def check():
    from test_attention_lower import _lower
    from test_compile import assert_no_spills
    from tiles.backends.hopper import runtime
    import pathlib
    import tempfile
    low = _lower(D=128, causal=False, launched=True)
    c = runtime.compile_cuda(edit(low.source, 1980), name=low.entry + "_tail.cu", cache=False)
    with tempfile.TemporaryDirectory() as d:
        assert_no_spills(c, low.entry, pathlib.Path(d))
    print("compiled:", c.resources.get(low.entry), flush=True)


def main():
    import torch
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.kernels import attention_fwd
    import hopper_gemm_tiles as ht
    D, H = 128, 16
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for S in (4096, 8192, 16384):
        B = 16384 // S
        sets, ref_sets = [], []
        for i in range(3):
            g = torch.Generator(device="cuda").manual_seed(i)
            q, k, v = (torch.randn(B, S, H, D, device="cuda", generator=g).bfloat16() for _ in range(3))
            sets.append((q, k, v, torch.empty_like(q), torch.empty(B, H, S, device="cuda")))
            ref_sets.append((q, k, v, torch.empty_like(q), torch.empty(B, H, S, device="cuda")))
        base = [split.launcher(W, attention_fwd, *x) for x in ref_sets]
        ws = torch.empty((B * H * S // 128) % sms * R * 128 * 129, device="cuda")
        tail = [launch(W, attention_fwd, *x, sms, ws) for x in sets]
        base[0](), tail[0][0](), tail[0][2]()
        torch.cuda.synchronize()
        kO, kL = sets[0][3].clone(), sets[0][4].clone()
        tail[0][1]()  # the torch merge: the kernel's must agree with it
        torch.cuda.synchronize()
        print(f"S={S}: merge kernel against torch's max |dO| {(kO.float() - sets[0][3].float()).abs().max().item():.3g} "
              f"|dLSE| {(kL - sets[0][4]).abs().max().item():.3g}", flush=True)
        dO = (sets[0][3].float() - ref_sets[0][3].float()).abs().max().item()
        dL = (sets[0][4] - ref_sets[0][4]).abs().max().item()
        ref = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(1, 2) for t in ref_sets[0][:3])).transpose(1, 2)
        dref = (ref_sets[0][3].float() - ref.float()).abs().max().item()
        print(f"S={S} B={B}: split against launched max |dO| {dO:.3g} |dLSE| {dL:.3g} (launched against cuDNN {dref:.3g})", flush=True)
        qt = [tuple(t.transpose(1, 2) for t in x[:3]) for x in sets]

        def cudnn(i):
            with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
                torch.nn.functional.scaled_dot_product_attention(*qt[i % 3])
        fns = {"launched": lambda i: base[i % 3](), "split": lambda i: tail[i % 3][0](),
               "split_merge_kernel": lambda i: (tail[i % 3][0](), tail[i % 3][2]()),
               "merge_kernel": lambda i: tail[i % 3][2](),
               "sdpa_cudnn": cudnn}
        flops = 4 * B * H * S * S * D
        for regime, ms in (("back to back", ht.timed(fns, rounds=9)), ("suite", ht.suite_timed(fns, 3, reps=25, budget_s=8.0))):
            print(f"  {regime}:", " ".join(f"{n}={t * 1e3:.0f}us/{flops / (t * 1e-3) / 1e12:.0f}({ms['launched'] / t:.3f})"
                                         for n, t in ms.items()), flush=True)


if __name__ == "__main__":
    check() if sys.argv[1:] == ["check"] else main()
