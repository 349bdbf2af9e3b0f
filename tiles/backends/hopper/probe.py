"""Layout probe: run real wgmmas on the GPU and check layouts.py, smem.h and the descriptors.

Four checks, each a tiny one-warpgroup kernel whose threads dump their raw registers:

* ``acc_ids``   A[r,0] = r, A[r,1] = 1, B[0,c] = 256, B[1,c] = c → D[r,c] = 256 r + c exactly, so each
                (thread, register) names the (row, col) it holds: must equal ``layouts.acc_coord``.
* ``acc_rand``  small random integers over the full K = 64 (four k16 steps, both descriptors advancing),
                B row-major (MN-major, wgmma transpose bit): D must equal A @ B exactly.
* ``acc_rand_bt`` the same with B given as N x K (K-major).
* ``a_regs``    A from registers (f16): thread t's element e holds 8 t + e, B = [I16 | 0] → D[r, k] = A[r, k]
                names the (thread, element) at (r, k): must equal ``layouts.a_coord``.
"""
from __future__ import annotations

from typing import Dict

from . import layouts, runtime

SOURCE = r"""
#include <tiles/tiles.h>
using namespace tiles;

// NVRTC has no C++ standard library, so no std::conditional: B is 64 x 256 (row-major B, MN-major)
// or 256 x 64 (B given transposed, K-major).
template <bool BT> struct pick_b_ { using type = st<bf16, 64, 256>; };
template <> struct pick_b_<true> { using type = st<bf16, 256, 64>; };
template <bool BT> using pick_b = typename pick_b_<BT>::type;

// A (64 x 64, K-major) and B (64 x 256) written with ordinary stores in the smem.h layouts, then
// read by wgmma through descriptors: the stores must land where TMA would put them.
template <bool BT> __device__ void probe_acc_impl(const float* A, const float* B, float* out, void* smem) {
  using a_t = st<bf16, 64, 64>;
  using b_t = pick_b<BT>;
  smem_allocator alloc(smem);
  a_t& sa = alloc.take<a_t>();
  b_t& sb = alloc.take<b_t>();
  const int t = threadIdx.x;
  for (int i = t; i < 64 * 64; i += 128) sa.at(i / 64, i % 64) = arch::from_float<bf16>(A[i]);
  for (int i = t; i < 64 * 256; i += 128) {
    const int k = i / 256, n = i % 256;
    if constexpr (BT) sb.at(n, k) = arch::from_float<bf16>(B[i]);
    else sb.at(k, n) = arch::from_float<bf16>(B[i]);
  }
  arch::fence_proxy_async();  // generic-proxy stores → async-proxy (wgmma) reads
  __syncthreads();
  rt<float, 64, 256> acc;
  if constexpr (BT) mma_ABt(acc, sa, 0, sb, false);
  else mma_AB(acc, sa, 0, sb, false);
  mma_commit();
  mma_wait<0>(acc);
  for (int p = 0; p < acc.pairs; ++p) {
    out[t * 128 + 2 * p] = acc.v[0][p].x;
    out[t * 128 + 2 * p + 1] = acc.v[0][p].y;
  }
}
extern "C" __global__ void __launch_bounds__(128) probe_acc(const float* A, const float* B, float* out) {
  extern __shared__ unsigned char smem[];
  probe_acc_impl<false>(A, B, out, smem);
}
extern "C" __global__ void __launch_bounds__(128) probe_acc_bt(const float* A, const float* B, float* out) {
  extern __shared__ unsigned char smem[];
  probe_acc_impl<true>(A, B, out, smem);
}

// A from registers: element e of thread t holds 8 t + e (exact in f16); B (16 x 64) = [I16 | 0].
extern "C" __global__ void __launch_bounds__(128) probe_areg(float* out) {
  extern __shared__ unsigned char smem[];
  smem_allocator alloc(smem);
  using b_t = st<f16, 16, 64>;
  b_t& sb = alloc.take<b_t>();
  const int t = threadIdx.x;
  for (int i = t; i < 16 * 64; i += 128) sb.at(i / 64, i % 64) = arch::from_float<f16>(i / 64 == i % 64 ? 1.f : 0.f);
  arch::fence_proxy_async();
  __syncthreads();
  rt<f16, 64, 16> a;
  for (int p = 0; p < a.pairs; ++p) a.v[0][p] = arch::pack2<f16>(float(8 * t + 2 * p), float(8 * t + 2 * p + 1));
  rt<float, 64, 64> acc;
  mma_AB(acc, a, sb, false);
  mma_commit();
  mma_wait<0>(acc);
  for (int p = 0; p < acc.pairs; ++p) {
    out[t * 32 + 2 * p] = acc.v[0][p].x;
    out[t * 32 + 2 * p + 1] = acc.v[0][p].y;
  }
}
"""

SMEM = 48 * 1024  # 8 KB A + 32 KB B + alignment slack


def source() -> str:
    return SOURCE


def run_layout_probe() -> Dict[str, dict]:
    """Run the four probes on the current CUDA device; {check: {ok, mismatches, detail}}."""
    import torch
    comp = runtime.compile_cuda(SOURCE, name="layout_probe.cu")
    dev = torch.device("cuda")
    res: Dict[str, dict] = {}

    def launch(name, args, smem=SMEM):
        k = runtime.load(comp.cubin, name)
        k.launch((1,), (128,), [runtime.arg_ptr(a) for a in args], smem=smem)
        torch.cuda.synchronize()

    # 1. accumulator ids
    A = torch.zeros(64, 64, dtype=torch.float32, device=dev)
    B = torch.zeros(64, 256, dtype=torch.float32, device=dev)
    A[:, 0] = torch.arange(64, device=dev, dtype=torch.float32)
    A[:, 1] = 1
    B[0, :] = 256
    B[1, :] = torch.arange(256, device=dev, dtype=torch.float32)
    out = torch.full((128 * 128,), -1.0, device=dev)
    launch("probe_acc", (A, B, out))
    got = out.view(128, 128).long().cpu().tolist()
    bad = [(t, i, divmod(v, 256), layouts.acc_coord(t, i)) for t in range(128) for i, v in enumerate(got[t])
           if divmod(v, 256) != layouts.acc_coord(t, i)]
    res["acc_ids"] = dict(ok=not bad, mismatches=len(bad), detail=bad[:8])

    # 2./3. random integer products, full K (checks descriptors and k-stepping, through the table)
    g = torch.Generator(device="cpu").manual_seed(0)
    A = torch.randint(-3, 4, (64, 64), generator=g).float()
    B = torch.randint(-3, 4, (64, 256), generator=g).float()
    ref = (A.double() @ B.double())
    for name in ("probe_acc", "probe_acc_bt"):
        out = torch.full((128 * 128,), float("nan"), device=dev)
        launch(name, (A.to(dev), B.to(dev), out))
        got = out.view(128, 128).double().cpu()
        D = torch.full((64, 256), float("nan"), dtype=torch.float64)
        for t in range(128):
            for i in range(128):
                D[layouts.acc_coord(t, i)] = got[t, i]
        nbad = int((D != ref).sum())
        res["acc_rand" + ("_bt" if name.endswith("bt") else "")] = dict(
            ok=nbad == 0, mismatches=nbad, detail=float((D - ref).abs().nan_to_num(1e9).max()))

    # 4. A-register fragment ids
    out = torch.full((128 * 32,), -1.0, device=dev)
    launch("probe_areg", (out,), smem=4096)
    got = out.view(128, 32).long().cpu().tolist()
    bad = []
    for t in range(128):
        for i in range(32):
            r, k = layouts.acc_coord(t, i)
            if k < 16:
                tt, e = divmod(got[t][i], 8)
                if layouts.a_coord(tt, e) != (r, k):
                    bad.append(((r, k), (tt, e), layouts.a_coord(tt, e)))
            elif got[t][i] != 0:
                bad.append(((r, k), "nonzero", got[t][i]))
    res["a_regs"] = dict(ok=not bad, mismatches=len(bad), detail=bad[:8])
    return res

