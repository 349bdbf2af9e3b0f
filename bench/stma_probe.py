"""Session 27: the A-scale tensor map of option scales_tma in a kernel that does nothing else (one TMA
copy into shared memory, read back), to tell a refused map from a refused destination."""
import sys

import torch

from tiles.backends.hopper import runtime

SRC = r"""
#include <tiles/tiles.h>
using namespace tiles;
extern "C" __global__ void probe(const __grid_constant__ tma_map m0, const __grid_constant__ tma_map m1,
                                 const __grid_constant__ tma_map m2, const __grid_constant__ tma_map m3,
                                 float* out, int c0, int c1, int offset, int which, int bytes) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ barrier bar;
  unsigned char* base = smem_raw + ((1024 - (arch::smem_addr(smem_raw) & 1023)) & 1023);
  sv<4096>& dst = *reinterpret_cast<sv<4096>*>(base + offset);
  if (threadIdx.x == 0) { init(bar, 1); arch::fence_mbar_init(); }
  __syncthreads();
  if (threadIdx.x == 0) {
    expect(bar, bytes);
    load_async(dst, which == 0 ? m0 : m3, bar, c0, c1);
  }
  wait(bar, 0);
  for (int i = threadIdx.x; i < bytes / 4; i += blockDim.x) out[i] = dst.data[i];
}
"""
variant = sys.argv[1]
comp = runtime.compile_cuda(SRC, name="stma_probe.cu")
k = runtime.load(comp.cubin, "probe")
M, KB = 256, 8
sa = torch.randn(M, KB, device="cuda")
if variant.startswith("m"):
    sat = sa.t().contiguous()  # (KB, M)
    mp = runtime.tensor_map(sat, (128, 1), 0, (M, KB), (1, M))
    c0, c1 = 128, 3
    want = sat[3, 128:256]
else:  # k<W>[x<R>][@<C0>]: a box W blocks wide, R rows (128 unless given), from K block C0 (3)
    shape, _, c0 = variant.split("_")[0][1:].partition("@")
    w, _, r = shape.partition("x")
    w, r, c0 = int(w or 4), int(r or 128), int(c0 or 3)
    sa = torch.randn(M, 64, device="cuda")
    mp = runtime.tensor_map(sa, (w, r), 0, (64, M), (1, 64))
    c1 = 128
    want = sa[128:128 + r, c0:c0 + w].reshape(-1)
out = torch.full((4096,), float("nan"), device="cuda")
offset, smem, which = (0x30000, 211712, 3) if variant.endswith("_far") else (0, 17408, 3)
dummy = runtime.null_map()
maps = [mp, dummy, dummy, mp]
k.launch((1, 1, 1), (128, 1, 1), maps + [runtime.arg_ptr(out), runtime.arg_i32(c0), runtime.arg_i32(c1),
                                         runtime.arg_i32(offset), runtime.arg_i32(which),
                                         runtime.arg_i32(want.numel() * 4)], smem=smem)
torch.cuda.synchronize()
n = want.numel()
print(variant, "ok, equal:", torch.equal(out[:n], want), flush=True)
