"""Session 33 prepared, session 34 measured (not adopted): the D = 128 forward with the two consumer
warpgroups half a key cycle apart, so their tile ends do not coincide.

bench/attention_timeline.py found that a tile's boundary costs 1.5 key-block times. That is 4.5 % of a
4k tile. Both warpgroups of a 128-row tile reach the boundary together, and neither then has wgmmas
to keep the tensor cores busy. The turns are worth at most 0.5 % (option pingpong=false ran 0.995-0.999x,
device_session33e.sh), so this prototype drops them. Work comes in items of T 128-row tile pairs of one
head, taken head-major over a grid of one CTA an SM, so that the CTAs of a round share a few heads' keys in
L2. For each item the producer streams the head's key blocks cyclically, 0 .. nk - 1 again and again,
into the usual 3-stage ring. The warpgroups own separate 64-row tiles (warpgroup w rows (2k + w) * 64),
and each has its own 16 KB Q tile, loaded by a second producer thread. Warpgroup 0's tiles start at
steps k * nk. Warpgroup 1's start at k * nk + nk / 2 and take their keys in rotated order (nk / 2 .. nk - 1,
0 .. nk / 2 - 1). Its last tile of an item is cut in two: keys 0 .. nk / 2 - 1 at the item's start (the raw
state, o, m and the lanes' l, saved to a workspace in fragment order) and the rest at its end, merged in
registers before the epilogue. Both warpgroups read every stage at the same step. The output is attention
but not the launched kernel's bits (the key order differs), so it is checked against float64.

Measured on the H200 (bench/hopper_notes.md, session 34): within the float64 bound everywhere, and
0.93-0.96x the launched kernel (0.73-0.75x with one head a CTA, T = S / 256, which is HBM-bound).

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_phase.py [check]

`check` (CPU) compiles it through NVRTC and asserts no spill and no serialized wgmma, and checks the
walk and the merge in Python. On the GPU (main): the float64 check, then the suite's timing and back to
back, beside the launched kernel and cuDNN, at an L2-resident shape and the standard suite's shapes.
"""
import sys

SOURCE = r"""
// bench/attention_phase.py: the D = 128 forward, warpgroups half a key cycle apart (one head a CTA)
#define TILES_WIDE_STORES 2
#include <tiles/tiles.h>
using namespace tiles;

constexpr int STAGES = 3, CONSUMERS = 2, WG_ROWS = 64;
constexpr int PRODUCER_REGS = 24, CONSUMER_REGS = 240;
constexpr int THREADS = 128 * (1 + CONSUMERS);

struct smem_t {
  st<bf16, 64, 128> q[CONSUMERS];  // each warpgroup's own Q tile
  st<bf16, 128, 128> kt[STAGES];
  st<bf16, 128, 128> vt[STAGES];
  ring<STAGES> ring;
  barrier q_full[CONSUMERS], q_empty[CONSUMERS];
};

__device__ __forceinline__ void release(barrier& b) { arrive(b); }

// warpgroup w's j-th segment of the walk: its 64-row tile, first key block, number of key blocks, and
// mode (0 whole; 1 the first half of warpgroup 1's last tile, state saved; 2 its second half, merged)
// within one item of T tile pairs (tiles counted from the item's first)
__device__ __forceinline__ void segment(int w, int j, int T, int nk, int& tile, int& kb0, int& len, int& mode) {
  const int half = nk / 2;
  if (w == 0) { tile = 2 * j, kb0 = 0, len = nk, mode = 0; return; }
  if (j == 0) { tile = 2 * (T - 1) + 1, kb0 = 0, len = half, mode = 1; return; }
  if (j == T) { tile = 2 * (T - 1) + 1, kb0 = half, len = nk - half, mode = 2; return; }
  tile = 2 * (j - 1) + 1, kb0 = half, len = nk, mode = 0;
}

// a landed block of S made P in place: the running maximum (scaled, exp2 domain), alpha = the old
// maximum's factor, the exponentials, and this lane's part of the row sums
__device__ __forceinline__ void softmax_block(rt<float, 64, 128>& s, rv<64>& m, rv<64>& m_new, rv<64>& alpha,
                                              rv<64>& l, int kb, int S, float C) {
  mask_cols(s, kb * 128, S, -INFINITY);
  row_max_scaled<true>(m_new, s, C, m);
  sub(alpha, m, m_new);
  exp2(alpha, alpha);
  exp2_scaled_row(s, s, C, m_new);
  mul(l, l, alpha);
  row_sum_partial(l, s, l);
}

// the raw state of a half tile, in fragment order (thread-major, so the reload is coalesced)
__device__ __forceinline__ void save_state(float* ws, const rt<float, 64, 128>& o, const rv<64>& m, const rv<64>& l) {
  const int th = wg_thread();
  float4* w4 = reinterpret_cast<float4*>(ws);
#pragma unroll
  for (int i = 0; i < 16; ++i)
    w4[i * 128 + th] = make_float4(o.v[0][2 * i].x, o.v[0][2 * i].y, o.v[0][2 * i + 1].x, o.v[0][2 * i + 1].y);
  reinterpret_cast<float4*>(ws + 64 * 128)[th] = make_float4(m.v[0][0], m.v[0][1], l.v[0][0], l.v[0][1]);
}
__device__ __forceinline__ void merge_state(const float* ws, rt<float, 64, 128>& o, rv<64>& m, rv<64>& l) {
  const int th = wg_thread();
  const float4 ml = reinterpret_cast<const float4*>(ws + 64 * 128)[th];
  const float m1[2] = {ml.x, ml.y}, l1[2] = {ml.z, ml.w};
  float a[2], a1[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float mm = fmaxf(m.v[0][h], m1[h]);
    a[h] = exp2f(m.v[0][h] - mm), a1[h] = exp2f(m1[h] - mm);
    m.v[0][h] = mm, l.v[0][h] = l.v[0][h] * a[h] + l1[h] * a1[h];
  }
  const float4* w4 = reinterpret_cast<const float4*>(ws);
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const float4 x = w4[i * 128 + th];  // pairs 2i (row h = 0) and 2i + 1 (row h = 1)
    o.v[0][2 * i].x = o.v[0][2 * i].x * a[0] + x.x * a1[0];
    o.v[0][2 * i].y = o.v[0][2 * i].y * a[0] + x.y * a1[0];
    o.v[0][2 * i + 1].x = o.v[0][2 * i + 1].x * a[1] + x.z * a1[1];
    o.v[0][2 * i + 1].y = o.v[0][2 * i + 1].y * a[1] + x.w * a1[1];
  }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
phase_fwd(const __grid_constant__ tma_map map_Q, const __grid_constant__ tma_map map_K,
          const __grid_constant__ tma_map map_V, bf16* __restrict__ O, float* __restrict__ L,
          float* __restrict__ ws, int S, int H, int T, int items, long long O_s0, long long O_s1, long long O_s2,
          long long L_s0, long long L_s1, long long L_s2, float scale) {
  extern __shared__ unsigned char smem_raw[];
  smem_allocator alloc(smem_raw);
  smem_t& Sm = alloc.take<smem_t>();
  // items of T 128-row tile pairs, head-major, so the CTAs of one round share a few heads' keys in L2
  const int nk = S / 128, G = S / 128 / T, steps = T * nk;
  if (threadIdx.x == 0) {
    Sm.ring.init_all(1, CONSUMERS * 128);
    for (int w = 0; w < CONSUMERS; ++w) init(Sm.q_full[w], 1), init(Sm.q_empty[w], 128);
    arch::fence_mbar_init();
  }
  __syncthreads();
  if (warpgroup_id() == 0) {
    arch::reg_dec<PRODUCER_REGS>();
    if (threadIdx.x == 0) {  // the keys and values, cyclically
      ring_pos<STAGES> pos;
      for (int it = blockIdx.x; it < items; it += gridDim.x)
      for (int t = 0; t < steps; ++t) {
        const int pid1 = (it / G) % H, pid2 = (it / G) / H, kb = t % nk;
        wait(Sm.ring.empty[pos.stage], pos.phase ^ 1);
        expect_tiles(Sm.ring.full[pos.stage], Sm.kt[pos.stage], Sm.vt[pos.stage]);
        load_async_4d(Sm.kt[pos.stage], map_K, Sm.ring.full[pos.stage], 0, pid1, kb * 128, pid2);
        load_async_4d(Sm.vt[pos.stage], map_V, Sm.ring.full[pos.stage], 0, pid1, kb * 128, pid2);
        pos.advance();
      }
    } else if (threadIdx.x == 32) {  // the Q tiles, in the order the warpgroups need them
      int loads0 = 0, loads1 = 0;  // each warpgroup's Q loads so far, for the empty barriers' phases
      for (int it = blockIdx.x; it < items; it += gridDim.x) {
        const int pid1 = (it / G) % H, pid2 = (it / G) / H, tile0 = (it % G) * 2 * T;
        int next0 = 0, next1 = 0;  // each warpgroup's next segment (scalars: no local memory)
        const int segs0 = T, segs1 = T + 1;
        while (next0 < segs0 || next1 < segs1) {
          // the step each one's next segment starts at
          const int at0 = next0 < segs0 ? next0 * nk : 0x7fffffff;
          const int at1 = next1 >= segs1 ? 0x7fffffff : next1 == 0 ? 0 : (next1 - 1) * nk + nk / 2;
          const int w = at0 <= at1 ? 0 : 1, j = w == 0 ? next0 : next1, n = w == 0 ? loads0 : loads1;
          int tile, kb0, len, mode;
          segment(w, j, T, nk, tile, kb0, len, mode);
          if (n > 0) wait(Sm.q_empty[w], (n - 1) & 1);
          expect_tiles(Sm.q_full[w], Sm.q[w]);
          load_async_4d(Sm.q[w], map_Q, Sm.q_full[w], 0, pid1, (tile0 + tile) * 64, pid2);
          if (w == 0) ++next0, ++loads0; else ++next1, ++loads1;
        }
      }
    }
  } else {
    arch::reg_inc<CONSUMER_REGS>();
    const int cw = __shfl_sync(0xffffffffu, warpgroup_id() - 1, 0);
    ring_pos<STAGES> pos;
    int held = -1;
    rt<float, WG_ROWS, 128> s;
    rt<bf16, WG_ROWS, 128> p;
    rt<float, WG_ROWS, 128> o;
    rv<WG_ROWS> m, m_new, alpha, l;
    const float C = scale * 1.4426950408889634f;
    float* my_ws = ws + (long long)blockIdx.x * (64 * 128 + 4 * 128);
    const int segs = cw == 0 ? T : T + 1;
    int loads = 0;
    for (int it = blockIdx.x; it < items; it += gridDim.x)
    for (int j = 0; j < segs; ++j, ++loads) {
      const int pid1 = (it / G) % H, pid2 = (it / G) / H;
      int tile, kb0, len, mode;
      segment(cw, j, T, nk, tile, kb0, len, mode);
      tile += (it % G) * 2 * T;
      wait(Sm.q_full[cw], loads & 1);
      fill(o, 0.0f);
      fill(l, 0.0f);
      fill(m, -1e+30f);
      {  // the first block, peeled
        const int kb = kb0 % nk;
        wait(Sm.ring.full[pos.stage], pos.phase);
        mma_ABt(s, Sm.q[cw], 0, Sm.kt[pos.stage], false);
        mma_commit();
        mma_wait<0>(s);
        if (len == 1) release(Sm.q_empty[cw]);
        softmax_block(s, m, m_new, alpha, l, kb, S, C);
        mul_row(o, o, alpha);
        cast(p, s);
        copy(m, m_new);
        held = pos.stage;
        pos.advance();
      }
      for (int i = 1; i < len; ++i) {
        const int kb = (kb0 + i) % nk;
        wait(Sm.ring.full[pos.stage], pos.phase);
        mma_ABt(s, Sm.q[cw], 0, Sm.kt[pos.stage], false);
        mma_commit();
        mma_AB(o, p, Sm.vt[held], true);
        mma_commit();
        mma_wait<1>(s);
        if (i + 1 == len) release(Sm.q_empty[cw]);
        softmax_block(s, m, m_new, alpha, l, kb, S, C);
        mma_wait<0>(o);
        release(Sm.ring.empty[held]), held = -1;
        mul_row(o, o, alpha);
        cast(p, s);
        copy(m, m_new);
        held = pos.stage;
        pos.advance();
      }
      mma_AB(o, p, Sm.vt[held], true);
      mma_commit();
      mma_wait<0>(o);
      release(Sm.ring.empty[held]), held = -1;
      if (mode == 1) {  // the first half of the last tile: keep its raw state for the end
        save_state(my_ws, o, m, l);
        continue;
      }
      if (mode == 2) merge_state(my_ws, o, m, l);
      row_sum_finish(l);
      div_row(o, o, l);
      store(O + pid2 * O_s0 + pid1 * O_s2, O_s1, S, 128, o, tile * 64, 0);
      log2(alpha, l);
      add(alpha, alpha, m);
      mul(alpha, alpha, 0.6931471805599453f);
      fill_where(alpha, l, [](float x) { return x == 0.0f; }, INFINITY);
      store(L + pid2 * L_s0 + pid1 * L_s1, L_s2, S, alpha, tile * 64);
    }
  }
}
"""


def compiled(cache=True):
    from tiles.backends.hopper import runtime
    return runtime.compile_cuda(SOURCE, name="attention_phase.cu", cache=cache)


def segment(w, j, n128, nk):  # n128 here is the item's T
    """bench's copy of the kernel's segment(): (tile, kb0, len, mode)."""
    half = nk // 2
    if w == 0:
        return 2 * j, 0, nk, 0
    if j == 0:
        return 2 * (n128 - 1) + 1, 0, half, 1
    if j == n128:
        return 2 * (n128 - 1) + 1, half, nk - half, 2
    return 2 * (j - 1) + 1, half, nk, 0


def check_walk(S, T):
    """The walk's bookkeeping, in Python, for one item of T tile pairs: each warpgroup's segments read
    the step's key block (t % nk) at every step, and every 64-row tile sees every key block once."""
    nk, n128 = S // 128, T
    seen = {}
    for w, segs in ((0, n128), (1, n128 + 1)):
        t = 0
        for j in range(segs):
            tile, kb0, n, mode = segment(w, j, n128, nk)
            assert tile % 2 == w
            for i in range(n):
                assert (kb0 + i) % nk == t % nk, (w, j, i, t)
                seen.setdefault(tile, []).append((kb0 + i) % nk)
                t += 1
        assert t == n128 * nk, (w, t)
    assert sorted(seen) == list(range(2 * n128)) and all(sorted(v) == list(range(nk)) for v in seen.values())


def check_merge(S=1024, D=128, seed=0):
    """The kernel's arithmetic in float64 numpy, step for step: the online softmax in the exp2 domain
    (m the scaled running maximum, o and l unnormalized), warpgroup 1's last tile in two halves whose
    raw states merge as merge_state() does, against a plain softmax."""
    import numpy as np
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((n, D)) for n in (64, S, S))
    C = D ** -0.5 * 1.4426950408889634
    nk, half = S // 128, S // 256

    def run(kbs, o, m, l):
        for kb in kbs:
            s = q @ k[kb * 128:(kb + 1) * 128].T
            m_new = np.maximum(m, C * s.max(1))
            alpha = np.exp2(m - m_new)
            p = np.exp2(C * s - m_new[:, None])
            l = l * alpha + p.sum(1)
            o = o * alpha[:, None] + p @ v[kb * 128:(kb + 1) * 128]
            m = m_new
        return o, m, l
    fresh = (np.zeros((64, D)), np.full(64, -1e30), np.zeros(64))
    o1, m1, l1 = run(range(half), *fresh)  # the walk's start: saved
    o, m, l = run(range(half, nk), *fresh)  # the walk's end
    mm = np.maximum(m, m1)
    a, a1 = np.exp2(m - mm), np.exp2(m1 - mm)
    o, l, m = o * a[:, None] + o1 * a1[:, None], l * a + l1 * a1, mm
    sc = q @ k.T * D ** -0.5
    p = np.exp(sc - sc.max(1, keepdims=True))
    ref = p @ v / p.sum(1, keepdims=True)
    lse = (np.log2(l) + m) * 0.6931471805599453
    ref_lse = np.log(np.exp(sc - sc.max(1, keepdims=True)).sum(1)) + sc.max(1)
    assert np.abs(o / l[:, None] - ref).max() < 1e-12 and np.abs(lse - ref_lse).max() < 1e-12


def check():
    check_merge()
    print("merge: the two halves' raw states combine to the whole softmax (float64)", flush=True)
    for S, T in ((256, 1), (256, 2), (512, 4), (4096, 8), (4096, 32), (8192, 16)):
        check_walk(S, T)
    print("walk: every tile sees every key block once, both warpgroups at the same block each step", flush=True)
    import pathlib
    import tempfile
    from test_compile import assert_no_spills
    c = compiled(cache=False)  # a cached compile keeps no ptxas log to read
    with tempfile.TemporaryDirectory() as d:
        assert_no_spills(c, "phase_fwd", pathlib.Path(d))
    print("compiled:", c.resources.get("phase_fwd"), flush=True)


def launcher(q, k, v, o, lse, T):
    """go(): the prototype on these tensors, items of T 128-row tile pairs on a grid of one CTA an SM."""
    import torch
    from tiles.backends.hopper import runtime
    from tiles.backends.hopper.attention_launch import rank4 as _rank4
    B, S, H, D = q.shape
    assert D == 128 and S % 256 == 0 and k.shape == q.shape, "the prototype's shapes"
    kern = runtime.load(compiled().cubin, "phase_fwd")
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    items = B * H * (S // 128 // T)
    assert S // 128 % T == 0, "T divides the 128-row tiles"
    grid = min(sms, items)
    ws = torch.empty(grid * (64 * 128 + 4 * 128), device=q.device)
    maps = [runtime.tensor_map(t, [64, 1, rows, 1], 128, *_rank4(t, 8)) for t, rows in ((q, 64), (k, 128), (v, 128))]
    args = [*maps, runtime.arg_ptr(o), runtime.arg_ptr(lse), runtime.arg_ptr(ws), runtime.arg_i32(S), runtime.arg_i32(H),
            runtime.arg_i32(T), runtime.arg_i32(items),
            *(runtime.arg_i64(x) for x in o.stride()[:3]), *(runtime.arg_i64(x) for x in lse.stride()),
            runtime.arg_f32(D ** -0.5)]
    smem = 2 * 16384 + 6 * 32768 + 2048

    def go():
        kern.launch((grid, 1, 1), (384, 1, 1), args, smem=smem)
    go.keep = (ws, maps)
    return go


def main():
    import torch
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W
    from tiles.kernels import attention_fwd
    import attention_split as split
    D = 128
    # (B, H, S, item sizes): 4 heads at 16k keep every key in L2, so the schedule shows alone; then
    # the standard suite's shapes (B * S = 16k tokens, H = 16)
    for B, H, S, Ts in ((1, 4, 16384, (1, 2, 4)), (4, 16, 4096, (1, 2, 4)), (1, 16, 16384, (2, 4, 8))):
        sets = split.input_sets(B, S, H, D)
        base = [split.launcher(W, attention_fwd, *x) for x in sets]
        q, k, v, o, lse = sets[0]
        base[0]()
        torch.cuda.synchronize()
        ref = torch.nn.functional.scaled_dot_product_attention(
            *(t[:, :, :4].transpose(1, 2).double() for t in (q, k, v))).transpose(1, 2)
        base_o, base_l = o.clone(), lse.clone()
        print(f"S={S}: max |O - float64| over 4 heads: launched {(base_o[:, :, :4].double() - ref).abs().max().item():.3g}",
              flush=True)
        fns = {"launched": lambda i: base[i % 3]()}
        for T in Ts:
            mine = [launcher(*x, T) for x in sets]
            o.zero_(), lse.zero_()
            mine[0]()
            torch.cuda.synchronize()
            err = (o[:, :, :4].double() - ref).abs().max().item()
            print(f"  T={T}: max |O - float64| {err:.3g}, max |dLSE| against launched "
                  f"{(lse - base_l).abs().max().item():.3g}, max |dO| against launched over all heads "
                  f"{(o.float() - base_o.float()).abs().max().item():.3g}", flush=True)
            fns[f"phase_T{T}"] = (lambda m: lambda i: m[i % 3]())(mine)
        fns["sdpa_cudnn"] = split.cudnn_fn(sets)
        split.report(fns, 4 * B * H * S * S * D, f"S={S} B={B} H={H}", suite=True, rounds=7)


if __name__ == "__main__":
    check() if sys.argv[1:] == ["check"] else main()
