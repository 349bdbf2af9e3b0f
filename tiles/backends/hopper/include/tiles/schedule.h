// tiles/schedule.h — which work a persistent CTA takes, in what order, and how split tiles are summed.
//
// A persistent GEMM runs one CTA per SM ("slot") over a list of output tiles. Dealt whole and round
// robin, tiles / slots leaves the last wave partly idle: 96 tiles on 132 SMs keep 36 SMs idle for the
// whole kernel. Stream-K (Osama et al., 2023) deals K blocks instead: the iterations (tile, kb) of the
// split tiles are laid end to end and each slot takes one contiguous, equal share. A tile whose K blocks
// fall into several shares is summed by the CTA holding its first K block (the "head"): the others
// store their partial sums to a workspace and raise a flag; the head adds them in K order, so the
// result is the same on every run.
//
// Only the last wave or two need splitting: the first `tiles - sk_tiles` tiles are dealt whole (round
// robin, as without stream-K) and `split_share` deals the rest. A share never waits before its first unit,
// and a head waits only for shares that start with that tile, so no slot waits on one that is
// itself waiting. Every slot must be resident at once: the grid is at most one CTA per SM.
#pragma once
#include "arch.h"
#include "rt.h"

namespace tiles {

// Tile t → (tm, tn), walking `group_m` tile-rows column by column so that CTAs running at the same
// time share B columns and A rows in L2.
__device__ __forceinline__ void tile_mn(int t, int tiles_m, int tiles_n, int group_m, int& tm, int& tn) {
  const int per_group = group_m * tiles_n;
  const int group = t / per_group, first_m = group * group_m;
  const int rows = ::min(tiles_m - first_m, group_m);
  const int in_group = t - group * per_group;
  tm = first_m + in_group % rows;
  tn = in_group / rows;
}

// K blocks [k0, k1) of tile `tile`.
struct work_unit {
  int tile, k0, k1;
};

// A persistent CTA's share of the split tiles (it takes its whole tiles first, in a loop of its own:
// kept apart, that loop compiles as it does without stream-K; walked by one loop, a unit whose K range
// comes from this arithmetic made ptxas treat the mainloop as divergent and move the wgmma descriptors
// from the uniform to the vector registers, 10 % slower on every tile).
// The split tiles' iterations are numbered from 0: i = (tile - dp_tiles) * kblocks + kb. The host keeps
// slots * sk_count below 2^31 (lower_fp8.split_tiles), so the shares' bounds are exact in 32 bits.
template <int CLUSTER = 1> struct split_share {
  int kblocks;
  int dp_tiles;      // tiles dealt whole, before the split ones
  int sk_count;      // iterations of the split tiles, dealt in equal shares
  int it, it_end;    // what is left of this slot's share

  // One slot per cluster of CLUSTER CTAs (its CTAs take the same work, each its own rows).
  __device__ __forceinline__ split_share(int tiles, int kblocks_, int sk_tiles)
      : kblocks(kblocks_), dp_tiles(tiles - sk_tiles), sk_count(sk_tiles * kblocks_),
        it(share_begin(slot())), it_end(share_begin(slot() + 1)) {}

  __device__ __forceinline__ static int slot() { return blockIdx.x / CLUSTER; }
  __device__ __forceinline__ static int slots() { return gridDim.x / CLUSTER; }

  // First iteration of slot s's share (s = slots: the end of the last share).
  __device__ __forceinline__ int share_begin(int s) const { return s * sk_count / slots(); }

  // The slot whose share holds iteration i.
  __device__ __forceinline__ int owner(int i) const {
    int s = i * slots() / sk_count;
    while (s + 1 < slots() && share_begin(s + 1) <= i) ++s;
    while (share_begin(s) > i) --s;
    return s;
  }

  // After a head's unit (the last of its share, which ends inside the tile): the last slot holding a
  // share of that tile.
  __device__ __forceinline__ int last_share() const { return owner(((it_end - 1) / kblocks + 1) * kblocks - 1); }

  __device__ __forceinline__ bool next(work_unit& w) {
    if (it >= it_end) return false;
    const int t = it / kblocks;
    w.tile = dp_tiles + t;
    w.k0 = it - t * kblocks;
    w.k1 = ::min(kblocks, w.k0 + (it_end - it));
    it += w.k1 - w.k0;
    return true;
  }
};

// ---------------------------------------------------------------- the split tiles' partial sums
// A warpgroup's fp32 register tile goes to its workspace slice as it sits in the registers: pair p of
// slice s of thread t at float2 index (s * pairs + p) * 128 + t, so each store instruction of the
// warpgroup writes 1 KB in one piece, and the head's warpgroup, whose threads hold the same elements,
// reads it back the same way.
template <int R, int C>
__device__ __forceinline__ void store_partial(float2* ws, const rt<float, R, C>& acc) {
#pragma unroll
  for (int s = 0; s < acc.slices; ++s)
#pragma unroll
    for (int p = 0; p < acc.pairs; ++p) ws[(s * acc.pairs + p) * 128 + wg_thread()] = acc.v[s][p];
}

template <int R, int C>
__device__ __forceinline__ void add_partial(rt<float, R, C>& acc, const float2* ws) {
#pragma unroll
  for (int s = 0; s < acc.slices; ++s)
#pragma unroll
    for (int p = 0; p < acc.pairs; ++p) {
      const float2 x = arch::ld_global_cg(ws + (s * acc.pairs + p) * 128 + wg_thread());
      acc.v[s][p].x += x.x;
      acc.v[s][p].y += x.y;
    }
}

// After the whole warpgroup stored its partial: one thread raises the flag (named barrier `bar` first,
// so every thread's stores come before the release).
__device__ __forceinline__ void partial_done(int* flag, int bar) {
  arch::bar_sync(bar, 128);
  if (wg_thread() == 0) arch::flag_release(flag, 1);
}

// Before the head's warpgroup reads a partial: one thread waits for its flag and lowers it again for
// the next launch (each flag is raised once and read once per launch); the barrier hands the
// acquire on to the rest of the warpgroup.
__device__ __forceinline__ void partial_wait(int* flag, int bar) {
  if (wg_thread() == 0) {
    while (arch::flag_acquire(flag) == 0) {
    }
    arch::flag_store(flag, 0);
  }
  arch::bar_sync(bar, 128);
}

}  // namespace tiles
