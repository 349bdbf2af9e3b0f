// tiles/tma.h — asynchronous global→shared loads (TMA) completing on mbarriers, and the stage ring.
//
// load_async(dst, map, bar, row, col) copies the R x C tile whose top-left element is (row, col) of
// the 2-D global view described by `map` into shared tile `dst`, one TMA box per swizzle chunk (the
// host builds `map` with box = chunk_cols x R and the matching swizzle: runtime.py tensor_map_2d).
// The barrier's phase completes when its expected bytes have landed: arm it with expect() first.
#pragma once
#include "arch.h"
#include "smem.h"

namespace tiles {

struct alignas(8) barrier {
  u64 word;
  __device__ u32 addr() const { return arch::smem_addr(&word); }
};

__device__ __forceinline__ void init(barrier& b, int arrivals) { arch::mbar_init(b.addr(), u32(arrivals)); }
__device__ __forceinline__ void arrive(barrier& b) { arch::mbar_arrive(b.addr()); }
// Arrive on the barrier at the same offset in CTA `rank` of the cluster (may be this CTA).
__device__ __forceinline__ void arrive_cluster(barrier& b, int rank) { arch::mbar_arrive_cluster(b.addr(), u32(rank)); }
// One arrival that also announces `bytes` of TMA traffic for the current phase.
__device__ __forceinline__ void expect(barrier& b, int bytes) { arch::mbar_arrive_expect_tx(b.addr(), u32(bytes)); }
template <typename... Tiles> __device__ __forceinline__ void expect_tiles(barrier& b, const Tiles&...) {
  expect(b, (0 + ... + Tiles::bytes));
}
// Block until the phase with this parity completed. Phases alternate 0, 1, 0, ...
__device__ __forceinline__ void wait(barrier& b, int phase) { arch::mbar_wait(b.addr(), u32(phase)); }

template <typename T, int R, int C, int SW>
__device__ __forceinline__ void load_async(st<T, R, C, SW>& dst, const tma_map& map, barrier& bar, int row, int col) {
  using ST = st<T, R, C, SW>;
#pragma unroll
  for (int j = 0; j < ST::chunks; ++j)
    arch::tma_load_2d(dst.addr() + j * ST::chunk_bytes, &map, bar.addr(), col + j * ST::chunk_cols, row);
}
// Column chunks [first, last) of `dst` only (a kernel skips chunks wholly right of the tensor: their
// columns are never stored, and the barrier is armed for the bytes actually fetched).
template <typename T, int R, int C, int SW>
__device__ __forceinline__ void load_async(st<T, R, C, SW>& dst, const tma_map& map, barrier& bar, int row, int col,
                                           int first, int last) {
  using ST = st<T, R, C, SW>;
  for (int j = first; j < last; ++j)
    arch::tma_load_2d(dst.addr() + j * ST::chunk_bytes, &map, bar.addr(), col + j * ST::chunk_cols, row);
}
// The same, written into every CTA of the cluster in `mask` (TMA multicast): CTAs that share an
// operand tile each fetch a part of it and all of them receive the whole.
template <typename T, int R, int C, int SW>
__device__ __forceinline__ void load_async_multicast(st<T, R, C, SW>& dst, const tma_map& map, barrier& bar, int row, int col,
                                                     int first, int last, u16 mask) {
  using ST = st<T, R, C, SW>;
  for (int j = first; j < last; ++j)
    arch::tma_load_2d_multicast(dst.addr() + j * ST::chunk_bytes, &map, bar.addr(), col + j * ST::chunk_cols, row, mask);
}
// Batched views (e.g. (B*H) x S x D attention tensors): the 3-D map's outermost coordinate is `batch`.
template <typename T, int R, int C, int SW>
__device__ __forceinline__ void load_async(st<T, R, C, SW>& dst, const tma_map& map, barrier& bar, int batch, int row, int col) {
  using ST = st<T, R, C, SW>;
#pragma unroll
  for (int j = 0; j < ST::chunks; ++j)
    arch::tma_load_3d(dst.addr() + j * ST::chunk_bytes, &map, bar.addr(), col + j * ST::chunk_cols, row, batch);
}
// A 2-D window of a rank-4 tensor (the tensor map describes all four axes, innermost first; the box
// is 1 on the fixed axes). `col` is the innermost coordinate (the tile's columns, one box per chunk);
// c1..c3 are the other coordinates, one of which is the tile's first row.
template <typename T, int R, int C, int SW>
__device__ __forceinline__ void load_async_4d(st<T, R, C, SW>& dst, const tma_map& map, barrier& bar, int col, int c1,
                                              int c2, int c3) {
  using ST = st<T, R, C, SW>;
#pragma unroll
  for (int j = 0; j < ST::chunks; ++j)
    arch::tma_load_4d(dst.addr() + j * ST::chunk_bytes, &map, bar.addr(), col + j * ST::chunk_cols, c1, c2, c3);
}
// A window of a 2-D view in an sv (one unswizzled box, c0 the innermost coordinate): the fp8 GEMM's
// scales of one K block, beside the stage's tiles.
template <int C>
__device__ __forceinline__ void load_async(sv<C>& dst, const tma_map& map, barrier& bar, int c0, int c1) {
  arch::tma_load_2d(dst.addr(), &map, bar.addr(), c0, c1);
}
// A vector's window (sv) of a rank-4 view, its elements along the innermost axis: one unswizzled box.
// Elements past the tensor read as zero and count toward the barrier's bytes, as a tile's do.
template <int C>
__device__ __forceinline__ void load_async_4d(sv<C>& dst, const tma_map& map, barrier& bar, int col, int c1, int c2,
                                              int c3) {
  arch::tma_load_4d(dst.addr(), &map, bar.addr(), col, c1, c2, c3);
}
// Shared → global; out-of-bounds elements are dropped. The caller fences (arch::fence_proxy_async)
// after writing `src` with ordinary stores, then commits and waits with arch::tma_store_*.
template <typename T, int R, int C, int SW>
__device__ __forceinline__ void store_async(const tma_map& map, const st<T, R, C, SW>& src, int row, int col) {
  using ST = st<T, R, C, SW>;
#pragma unroll
  for (int j = 0; j < ST::chunks; ++j) arch::tma_store_2d(&map, src.addr() + j * ST::chunk_bytes, col + j * ST::chunk_cols, row);
}
// The same into a window of a rank-4 tensor (coordinates as load_async_4d's).
template <typename T, int R, int C, int SW>
__device__ __forceinline__ void store_async_4d(const tma_map& map, const st<T, R, C, SW>& src, int col, int c1, int c2,
                                               int c3) {
  using ST = st<T, R, C, SW>;
#pragma unroll
  for (int j = 0; j < ST::chunks; ++j)
    arch::tma_store_4d(&map, src.addr() + j * ST::chunk_bytes, col + j * ST::chunk_cols, c1, c2, c3);
}

// A ring of STAGES buffers: `full[s]` completes when stage s holds data (producer's TMA), `empty[s]`
// completes when every consumer released it. Producer and consumers walk the same sequence of
// positions; the phase flips each time the ring wraps around.
template <int STAGES> struct ring {
  barrier full[STAGES];
  barrier empty[STAGES];
  __device__ void init_all(int producers, int consumers) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) init(full[s], producers), init(empty[s], consumers);
  }
};
template <int STAGES> struct ring_pos {
  int stage = 0, phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == STAGES) stage = 0, phase ^= 1;
  }
};

}  // namespace tiles
