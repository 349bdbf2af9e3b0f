// tiles/arch.h — the Hopper (sm_90a) arch layer.
//
// This is the ONLY tiles header that spells inline PTX or vendor intrinsics. Everything above it
// (smem.h, rt.h, ops.h, tma.h) is ordinary C++ over these functions, so the instructions tiles depends
// on can be audited in one place (and re-implemented for an emulator).
//
// No system headers: NVRTC compiles this without a CUDA include path, so bf16/f16 are our own 16-bit
// storage types and conversions go through PTX `cvt`.
//
// The wgmma wrappers between "BEGIN GENERATED" and "END GENERATED" are written by
// tiles/backends/hopper/gen_arch.py (the operand lists are 128 entries long); edit that script, not them.
#pragma once

namespace tiles {

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// 16-bit floating storage types. Plain structs (not cuda_bf16.h) so the headers build with bare NVRTC.
struct bf16 { u16 bits; };
struct f16 { u16 bits; };
// OCP 8-bit float (4 exponent, 3 mantissa bits): only ever a wgmma operand in shared memory here.
struct fp8e4m3 { unsigned char bits; };

// The 128-byte CUtensorMap built on the host by cuTensorMapEncodeTiled, passed by value as a
// `const __grid_constant__` kernel parameter; the device only ever takes its address.
struct alignas(64) tma_map { unsigned char bytes[128]; };

namespace arch {

// ---------------------------------------------------------------- addresses, thread ids
__device__ __forceinline__ u32 smem_addr(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ int lane_id() { return threadIdx.x & 31; }

// ---------------------------------------------------------------- number conversions
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(bf16 x) { return __uint_as_float(u32(x.bits) << 16); }
__device__ __forceinline__ float to_float(f16 x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
}
template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 from_float<bf16>(float x) {
  bf16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(x));
  return r;
}
template <> __device__ __forceinline__ f16 from_float<f16>(float x) {
  f16 r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.bits) : "f"(x));
  return r;
}
// Two floats → one 32-bit register of two 16-bit values, `lo` in the low half (the element with the
// smaller column index in every wgmma fragment). PTX cvt.*x2 puts its FIRST source in the HIGH half.
template <typename T> __device__ __forceinline__ u32 pack2(float lo, float hi);
template <> __device__ __forceinline__ u32 pack2<bf16>(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
template <> __device__ __forceinline__ u32 pack2<f16>(float lo, float hi) {
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
template <typename T> __device__ __forceinline__ float2 unpack2(u32 v) {
  T lo{u16(v & 0xffff)}, hi{u16(v >> 16)};
  return make_float2(to_float(lo), to_float(hi));
}

// ---------------------------------------------------------------- math
// 2^x on the SFU (MUFU.EX2); flush-to-zero is what softmax wants (exp2 of -inf → 0).
__device__ __forceinline__ float exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float log2(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float rsqrt(float x) {
  float y;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
__device__ __forceinline__ u32 shfl_xor(u32 v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
__device__ __forceinline__ float shfl(float v, int src_lane) { return __shfl_sync(0xffffffffu, v, src_lane); }

// ---------------------------------------------------------------- global memory (simt.h)
// 16 bytes from global memory the kernel never writes: the non-coherent path, not kept in L1 (a
// streaming read is touched once). `p` must be 16-byte aligned.
__device__ __forceinline__ uint4 ld_global_nc_v4(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}

// ---------------------------------------------------------------- flags between CTAs (schedule.h)
// A CTA publishes data in global memory to another CTA with `flag_release` after its own writes (and,
// through a barrier, its warpgroup's); the reader's `flag_acquire` then sees them. GPU scope: the two
// CTAs run on different SMs. The data itself is read with `ld_global_cg` (L2, not this SM's L1, which
// is not coherent with other SMs' writes).
__device__ __forceinline__ void flag_release(int* flag, int value) {
  asm volatile("fence.acq_rel.gpu;\n\tst.relaxed.gpu.global.s32 [%0], %1;" ::"l"(flag), "r"(value) : "memory");
}
__device__ __forceinline__ int flag_acquire(const int* flag) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
  return v;
}
__device__ __forceinline__ void flag_store(int* flag, int value) {
  asm volatile("st.relaxed.gpu.global.s32 [%0], %1;" ::"l"(flag), "r"(value) : "memory");
}
__device__ __forceinline__ float2 ld_global_cg(const float2* p) {
  float2 r;
  asm volatile("ld.global.cg.v2.f32 {%0, %1}, [%2];" : "=f"(r.x), "=f"(r.y) : "l"(p));
  return r;
}

// ---------------------------------------------------------------- register budget (setmaxnreg)
// Takes effect only when the kernel has a register cap at entry (__launch_bounds__(threads, 1)); every
// thread of the warpgroup must execute it (.sync.aligned).
template <int N> __device__ __forceinline__ void reg_inc() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg count: multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N> __device__ __forceinline__ void reg_dec() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg count: multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
// The registers a thread starts with under __launch_bounds__(threads, 1): 64K / threads, at most 255,
// in steps of 8. The CTA's allocation is that times its threads, and setmaxnreg only moves registers
// within it: budgets that sum past it leave setmaxnreg.inc waiting forever (at 384 threads, 168 each:
// 24 + 2 x 240 fits, 32 + 2 x 240 hangs).
__host__ __device__ constexpr int entry_registers(int threads) { return (65536 / threads < 255 ? 65536 / threads : 255) / 8 * 8; }

// ---------------------------------------------------------------- matrix stores (stmatrix)
// Four 8x8 matrices of 16-bit elements from a warp's registers into shared memory: lane l holds two
// elements (one u32) of each, at row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1, which is the wgmma
// accumulator's layout of an 8x8 block, so a 16-bit register tile goes out four pairs an instruction.
// Lanes 8i .. 8i + 7 give the addresses of matrix i's eight rows (16 bytes each).
__device__ __forceinline__ void stmatrix_x4(u32 addr, u32 r0, u32 r1, u32 r2, u32 r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
               :: "r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}

// ---------------------------------------------------------------- fences and named barriers
// Ordinary st.shared writes that wgmma or TMA (the async proxy) read next need this in the writer.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// Barrier among `n` threads (a multiple of 32) on hardware barrier `id` (1..15; 0 is __syncthreads).
__device__ __forceinline__ void bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void bar_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }

// ---------------------------------------------------------------- mbarrier
__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialised barriers visible to the async proxy (TMA) before any copy completes on them.
__device__ __forceinline__ void fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Arrive once and add `bytes` to the transaction count the current phase waits for.
__device__ __forceinline__ void mbar_arrive_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// True once the phase with parity `parity` has completed (a fresh barrier counts parity 1 as completed).
__device__ __forceinline__ bool mbar_try_wait(u32 bar, u32 parity) {
  u32 ok;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

// ---------------------------------------------------------------- TMA (cp.async.bulk.tensor)
// Coordinates are innermost-first, in elements, as the tensor map's dimensions are. Out-of-bounds
// elements of the box are written as zeros and still count toward the barrier's transaction bytes.
__device__ __forceinline__ void tma_load_2d(u32 dst, const tma_map* map, u32 bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
      ::"r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
__device__ __forceinline__ void tma_load_3d(u32 dst, const tma_map* map, u32 bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
      ::"r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar) : "memory");
}
__device__ __forceinline__ void tma_load_4d(u32 dst, const tma_map* map, u32 bar, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];"
      ::"r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar) : "memory");
}
// Stores drop out-of-bounds elements. Completion is tracked per thread in bulk groups.
__device__ __forceinline__ void tma_store_2d(const tma_map* map, u32 src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
               ::"l"(map), "r"(c0), "r"(c1), "r"(src) : "memory");
}
__device__ __forceinline__ void tma_store_3d(const tma_map* map, u32 src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];"
               ::"l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(src) : "memory");
}
__device__ __forceinline__ void tma_store_4d(const tma_map* map, u32 src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%1, %2, %3, %4}], [%5];"
               ::"l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(src) : "memory");
}
// Adds the box into global memory (f32: done by the L2, atomically per element); out-of-bounds elements
// are dropped. Tracked in the same bulk groups as the stores.
__device__ __forceinline__ void tma_reduce_add_4d(const tma_map* map, u32 src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2, %3, %4}], [%5];"
               ::"l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(src) : "memory");
}
__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Wait until at most N committed store groups still READ shared memory (the buffer may be reused).
template <int N> __device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
// Wait until at most N committed store groups are still in flight (writes visible in global memory).
template <int N> __device__ __forceinline__ void tma_store_wait() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void tma_prefetch_map(const tma_map* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
}

// ---------------------------------------------------------------- clusters (thread block clusters)
__device__ __forceinline__ u32 cluster_ctarank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// All threads of every CTA of the cluster (release on arrive, acquire on wait).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive;\nbarrier.cluster.wait;" ::: "memory");
}
// The shared::cluster address of the same shared variable in CTA `rank` of this cluster.
__device__ __forceinline__ u32 mapa(u32 addr, u32 rank) {
  u32 r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
// Arrive on an mbarrier of (possibly) another CTA of the cluster. Default semantics (release, CTA
// scope): the arriving warp only releases shared memory its wgmmas already finished reading; asking
// for .release.cluster makes ptxas put a MEMBAR.ALL.GPU in front of every arrival.
__device__ __forceinline__ void mbar_arrive_cluster(u32 bar, u32 rank) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(mapa(bar, rank)) : "memory");
}
// TMA load written to the same shared offset in every CTA of `mask`, completing on the mbarrier at the
// same offset in each of them.
__device__ __forceinline__ void tma_load_2d_multicast(u32 dst, const tma_map* map, u32 bar, int c0, int c1, u16 mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;"
      ::"r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(bar), "h"(mask) : "memory");
}
// Dynamic shared memory the block was launched with (a guard against host/device size mismatch).
__device__ __forceinline__ u32 dynamic_smem_size() {
  u32 r;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
  return r;
}

// ---------------------------------------------------------------- wgmma control
// wgmma.fence: orders this warpgroup's register writes (accumulators, A fragments) before the next
// wgmma.mma_async reads them. Needed before the first mma of a batch and after touching the registers.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Wait until at most N committed wgmma groups of this warpgroup are pending.
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Accumulator registers are read-modify-written by the async tensor core; this tells the compiler the
// values may have changed so it does not move reads/writes of them across a wait.
template <int NP> __device__ __forceinline__ void wgmma_touch(float2 (&d)[NP]) {
#pragma unroll
  for (int i = 0; i < NP; ++i) asm volatile("" : "+f"(d[i].x), "+f"(d[i].y)::"memory");
}

// wgmma.mma_async m64nNk16 with fp32 accumulators, issued by one warpgroup (128 threads).
//   d:        the thread's N/2 accumulators as N/4 float2 pairs, in the fragment order of layouts.py
//   desc_a:   64x16 A tile in shared memory (smem.h builds descriptors); or
//   a[4]:     64x16 A fragment in registers (two 16-bit values per u32, layouts.py `a_frag`)
//   desc_b:   16xN B tile in shared memory
//   scale_d:  0 → D = A·B, else D += A·B
//   TA / TB:  0 = K-major operand, 1 = MN-major ("transposed"); TA only exists for A in shared memory.
template <int N, typename AB, int TA, int TB> struct wgmma_ss;
template <int N, typename AB, int TB> struct wgmma_rs;

// BEGIN GENERATED wgmma (gen_arch.py)
// ---- N = 16: 8 accumulators per thread
#define TILES_WGMMA_D16 "{" "%0, %1, %2, %3, %4, %5, %6, %7" "}"
#define TILES_WGMMA_OPS16(d) "+f"(d[0].x), "+f"(d[0].y), "+f"(d[1].x), "+f"(d[1].y), "+f"(d[2].x), "+f"(d[2].y), "+f"(d[3].x), "+f"(d[3].y)
template <int TA, int TB> struct wgmma_ss<16, bf16, TA, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[4], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %10, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 " TILES_WGMMA_D16
                 ", %8, %9, p, 1, 1, %11, %12;\n}\n"
                 : TILES_WGMMA_OPS16(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};
template <int TB> struct wgmma_rs<16, bf16, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[4], const u32 (&a)[4], u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %13, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 " TILES_WGMMA_D16
                 ", {%8, %9, %10, %11}, %12, p, 1, 1, %14;\n}\n"
                 : TILES_WGMMA_OPS16(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
  }
};
template <int TA, int TB> struct wgmma_ss<16, f16, TA, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[4], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %10, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 " TILES_WGMMA_D16
                 ", %8, %9, p, 1, 1, %11, %12;\n}\n"
                 : TILES_WGMMA_OPS16(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};
template <int TB> struct wgmma_rs<16, f16, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[4], const u32 (&a)[4], u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %13, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 " TILES_WGMMA_D16
                 ", {%8, %9, %10, %11}, %12, p, 1, 1, %14;\n}\n"
                 : TILES_WGMMA_OPS16(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
  }
};
// ---- N = 32: 16 accumulators per thread
#define TILES_WGMMA_D32 "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15" "}"
#define TILES_WGMMA_OPS32(d) "+f"(d[0].x), "+f"(d[0].y), "+f"(d[1].x), "+f"(d[1].y), "+f"(d[2].x), "+f"(d[2].y), "+f"(d[3].x), "+f"(d[3].y), "+f"(d[4].x), "+f"(d[4].y), "+f"(d[5].x), "+f"(d[5].y), "+f"(d[6].x), "+f"(d[6].y), "+f"(d[7].x), "+f"(d[7].y)
template <int TA, int TB> struct wgmma_ss<32, bf16, TA, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[8], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %18, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 " TILES_WGMMA_D32
                 ", %16, %17, p, 1, 1, %19, %20;\n}\n"
                 : TILES_WGMMA_OPS32(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};
template <int TB> struct wgmma_rs<32, bf16, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[8], const u32 (&a)[4], u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %21, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 " TILES_WGMMA_D32
                 ", {%16, %17, %18, %19}, %20, p, 1, 1, %22;\n}\n"
                 : TILES_WGMMA_OPS32(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
  }
};
template <int TA, int TB> struct wgmma_ss<32, f16, TA, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[8], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %18, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 " TILES_WGMMA_D32
                 ", %16, %17, p, 1, 1, %19, %20;\n}\n"
                 : TILES_WGMMA_OPS32(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};
template <int TB> struct wgmma_rs<32, f16, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[8], const u32 (&a)[4], u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %21, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 " TILES_WGMMA_D32
                 ", {%16, %17, %18, %19}, %20, p, 1, 1, %22;\n}\n"
                 : TILES_WGMMA_OPS32(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
  }
};
// ---- N = 64: 32 accumulators per thread
#define TILES_WGMMA_D64 "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" "}"
#define TILES_WGMMA_OPS64(d) "+f"(d[0].x), "+f"(d[0].y), "+f"(d[1].x), "+f"(d[1].y), "+f"(d[2].x), "+f"(d[2].y), "+f"(d[3].x), "+f"(d[3].y), "+f"(d[4].x), "+f"(d[4].y), "+f"(d[5].x), "+f"(d[5].y), "+f"(d[6].x), "+f"(d[6].y), "+f"(d[7].x), "+f"(d[7].y), "+f"(d[8].x), "+f"(d[8].y), "+f"(d[9].x), "+f"(d[9].y), "+f"(d[10].x), "+f"(d[10].y), "+f"(d[11].x), "+f"(d[11].y), "+f"(d[12].x), "+f"(d[12].y), "+f"(d[13].x), "+f"(d[13].y), "+f"(d[14].x), "+f"(d[14].y), "+f"(d[15].x), "+f"(d[15].y)
template <int TA, int TB> struct wgmma_ss<64, bf16, TA, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[16], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " TILES_WGMMA_D64
                 ", %32, %33, p, 1, 1, %35, %36;\n}\n"
                 : TILES_WGMMA_OPS64(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};
template <int TB> struct wgmma_rs<64, bf16, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[16], const u32 (&a)[4], u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %37, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " TILES_WGMMA_D64
                 ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
                 : TILES_WGMMA_OPS64(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
  }
};
template <int TA, int TB> struct wgmma_ss<64, f16, TA, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[16], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " TILES_WGMMA_D64
                 ", %32, %33, p, 1, 1, %35, %36;\n}\n"
                 : TILES_WGMMA_OPS64(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};
template <int TB> struct wgmma_rs<64, f16, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[16], const u32 (&a)[4], u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %37, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " TILES_WGMMA_D64
                 ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
                 : TILES_WGMMA_OPS64(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
  }
};
// ---- N = 96: 48 accumulators per thread
#define TILES_WGMMA_D96 "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47" "}"
#define TILES_WGMMA_OPS96(d) "+f"(d[0].x), "+f"(d[0].y), "+f"(d[1].x), "+f"(d[1].y), "+f"(d[2].x), "+f"(d[2].y), "+f"(d[3].x), "+f"(d[3].y), "+f"(d[4].x), "+f"(d[4].y), "+f"(d[5].x), "+f"(d[5].y), "+f"(d[6].x), "+f"(d[6].y), "+f"(d[7].x), "+f"(d[7].y), "+f"(d[8].x), "+f"(d[8].y), "+f"(d[9].x), "+f"(d[9].y), "+f"(d[10].x), "+f"(d[10].y), "+f"(d[11].x), "+f"(d[11].y), "+f"(d[12].x), "+f"(d[12].y), "+f"(d[13].x), "+f"(d[13].y), "+f"(d[14].x), "+f"(d[14].y), "+f"(d[15].x), "+f"(d[15].y), "+f"(d[16].x), "+f"(d[16].y), "+f"(d[17].x), "+f"(d[17].y), "+f"(d[18].x), "+f"(d[18].y), "+f"(d[19].x), "+f"(d[19].y), "+f"(d[20].x), "+f"(d[20].y), "+f"(d[21].x), "+f"(d[21].y), "+f"(d[22].x), "+f"(d[22].y), "+f"(d[23].x), "+f"(d[23].y)
template <int TA, int TB> struct wgmma_ss<96, bf16, TA, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[24], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %50, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 " TILES_WGMMA_D96
                 ", %48, %49, p, 1, 1, %51, %52;\n}\n"
                 : TILES_WGMMA_OPS96(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};
template <int TB> struct wgmma_rs<96, bf16, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[24], const u32 (&a)[4], u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %53, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 " TILES_WGMMA_D96
                 ", {%48, %49, %50, %51}, %52, p, 1, 1, %54;\n}\n"
                 : TILES_WGMMA_OPS96(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
  }
};
template <int TA, int TB> struct wgmma_ss<96, f16, TA, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[24], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %50, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n96k16.f32.f16.f16 " TILES_WGMMA_D96
                 ", %48, %49, p, 1, 1, %51, %52;\n}\n"
                 : TILES_WGMMA_OPS96(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};
template <int TB> struct wgmma_rs<96, f16, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[24], const u32 (&a)[4], u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %53, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n96k16.f32.f16.f16 " TILES_WGMMA_D96
                 ", {%48, %49, %50, %51}, %52, p, 1, 1, %54;\n}\n"
                 : TILES_WGMMA_OPS96(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
  }
};
// ---- N = 128: 64 accumulators per thread
#define TILES_WGMMA_D128 "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" "}"
#define TILES_WGMMA_OPS128(d) "+f"(d[0].x), "+f"(d[0].y), "+f"(d[1].x), "+f"(d[1].y), "+f"(d[2].x), "+f"(d[2].y), "+f"(d[3].x), "+f"(d[3].y), "+f"(d[4].x), "+f"(d[4].y), "+f"(d[5].x), "+f"(d[5].y), "+f"(d[6].x), "+f"(d[6].y), "+f"(d[7].x), "+f"(d[7].y), "+f"(d[8].x), "+f"(d[8].y), "+f"(d[9].x), "+f"(d[9].y), "+f"(d[10].x), "+f"(d[10].y), "+f"(d[11].x), "+f"(d[11].y), "+f"(d[12].x), "+f"(d[12].y), "+f"(d[13].x), "+f"(d[13].y), "+f"(d[14].x), "+f"(d[14].y), "+f"(d[15].x), "+f"(d[15].y), "+f"(d[16].x), "+f"(d[16].y), "+f"(d[17].x), "+f"(d[17].y), "+f"(d[18].x), "+f"(d[18].y), "+f"(d[19].x), "+f"(d[19].y), "+f"(d[20].x), "+f"(d[20].y), "+f"(d[21].x), "+f"(d[21].y), "+f"(d[22].x), "+f"(d[22].y), "+f"(d[23].x), "+f"(d[23].y), "+f"(d[24].x), "+f"(d[24].y), "+f"(d[25].x), "+f"(d[25].y), "+f"(d[26].x), "+f"(d[26].y), "+f"(d[27].x), "+f"(d[27].y), "+f"(d[28].x), "+f"(d[28].y), "+f"(d[29].x), "+f"(d[29].y), "+f"(d[30].x), "+f"(d[30].y), "+f"(d[31].x), "+f"(d[31].y)
template <int TA, int TB> struct wgmma_ss<128, bf16, TA, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[32], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " TILES_WGMMA_D128
                 ", %64, %65, p, 1, 1, %67, %68;\n}\n"
                 : TILES_WGMMA_OPS128(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};
template <int TB> struct wgmma_rs<128, bf16, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[32], const u32 (&a)[4], u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " TILES_WGMMA_D128
                 ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
                 : TILES_WGMMA_OPS128(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
  }
};
template <int TA, int TB> struct wgmma_ss<128, f16, TA, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[32], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " TILES_WGMMA_D128
                 ", %64, %65, p, 1, 1, %67, %68;\n}\n"
                 : TILES_WGMMA_OPS128(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};
template <int TB> struct wgmma_rs<128, f16, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[32], const u32 (&a)[4], u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " TILES_WGMMA_D128
                 ", {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
                 : TILES_WGMMA_OPS128(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
  }
};
// ---- N = 160: 80 accumulators per thread
#define TILES_WGMMA_D160 "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79" "}"
#define TILES_WGMMA_OPS160(d) "+f"(d[0].x), "+f"(d[0].y), "+f"(d[1].x), "+f"(d[1].y), "+f"(d[2].x), "+f"(d[2].y), "+f"(d[3].x), "+f"(d[3].y), "+f"(d[4].x), "+f"(d[4].y), "+f"(d[5].x), "+f"(d[5].y), "+f"(d[6].x), "+f"(d[6].y), "+f"(d[7].x), "+f"(d[7].y), "+f"(d[8].x), "+f"(d[8].y), "+f"(d[9].x), "+f"(d[9].y), "+f"(d[10].x), "+f"(d[10].y), "+f"(d[11].x), "+f"(d[11].y), "+f"(d[12].x), "+f"(d[12].y), "+f"(d[13].x), "+f"(d[13].y), "+f"(d[14].x), "+f"(d[14].y), "+f"(d[15].x), "+f"(d[15].y), "+f"(d[16].x), "+f"(d[16].y), "+f"(d[17].x), "+f"(d[17].y), "+f"(d[18].x), "+f"(d[18].y), "+f"(d[19].x), "+f"(d[19].y), "+f"(d[20].x), "+f"(d[20].y), "+f"(d[21].x), "+f"(d[21].y), "+f"(d[22].x), "+f"(d[22].y), "+f"(d[23].x), "+f"(d[23].y), "+f"(d[24].x), "+f"(d[24].y), "+f"(d[25].x), "+f"(d[25].y), "+f"(d[26].x), "+f"(d[26].y), "+f"(d[27].x), "+f"(d[27].y), "+f"(d[28].x), "+f"(d[28].y), "+f"(d[29].x), "+f"(d[29].y), "+f"(d[30].x), "+f"(d[30].y), "+f"(d[31].x), "+f"(d[31].y), "+f"(d[32].x), "+f"(d[32].y), "+f"(d[33].x), "+f"(d[33].y), "+f"(d[34].x), "+f"(d[34].y), "+f"(d[35].x), "+f"(d[35].y), "+f"(d[36].x), "+f"(d[36].y), "+f"(d[37].x), "+f"(d[37].y), "+f"(d[38].x), "+f"(d[38].y), "+f"(d[39].x), "+f"(d[39].y)
template <int TA, int TB> struct wgmma_ss<160, bf16, TA, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[40], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %82, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n160k16.f32.bf16.bf16 " TILES_WGMMA_D160
                 ", %80, %81, p, 1, 1, %83, %84;\n}\n"
                 : TILES_WGMMA_OPS160(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};
template <int TB> struct wgmma_rs<160, bf16, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[40], const u32 (&a)[4], u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %85, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n160k16.f32.bf16.bf16 " TILES_WGMMA_D160
                 ", {%80, %81, %82, %83}, %84, p, 1, 1, %86;\n}\n"
                 : TILES_WGMMA_OPS160(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
  }
};
template <int TA, int TB> struct wgmma_ss<160, f16, TA, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[40], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %82, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n160k16.f32.f16.f16 " TILES_WGMMA_D160
                 ", %80, %81, p, 1, 1, %83, %84;\n}\n"
                 : TILES_WGMMA_OPS160(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};
template <int TB> struct wgmma_rs<160, f16, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[40], const u32 (&a)[4], u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %85, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n160k16.f32.f16.f16 " TILES_WGMMA_D160
                 ", {%80, %81, %82, %83}, %84, p, 1, 1, %86;\n}\n"
                 : TILES_WGMMA_OPS160(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
  }
};
// ---- N = 176: 88 accumulators per thread
#define TILES_WGMMA_D176 "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87" "}"
#define TILES_WGMMA_OPS176(d) "+f"(d[0].x), "+f"(d[0].y), "+f"(d[1].x), "+f"(d[1].y), "+f"(d[2].x), "+f"(d[2].y), "+f"(d[3].x), "+f"(d[3].y), "+f"(d[4].x), "+f"(d[4].y), "+f"(d[5].x), "+f"(d[5].y), "+f"(d[6].x), "+f"(d[6].y), "+f"(d[7].x), "+f"(d[7].y), "+f"(d[8].x), "+f"(d[8].y), "+f"(d[9].x), "+f"(d[9].y), "+f"(d[10].x), "+f"(d[10].y), "+f"(d[11].x), "+f"(d[11].y), "+f"(d[12].x), "+f"(d[12].y), "+f"(d[13].x), "+f"(d[13].y), "+f"(d[14].x), "+f"(d[14].y), "+f"(d[15].x), "+f"(d[15].y), "+f"(d[16].x), "+f"(d[16].y), "+f"(d[17].x), "+f"(d[17].y), "+f"(d[18].x), "+f"(d[18].y), "+f"(d[19].x), "+f"(d[19].y), "+f"(d[20].x), "+f"(d[20].y), "+f"(d[21].x), "+f"(d[21].y), "+f"(d[22].x), "+f"(d[22].y), "+f"(d[23].x), "+f"(d[23].y), "+f"(d[24].x), "+f"(d[24].y), "+f"(d[25].x), "+f"(d[25].y), "+f"(d[26].x), "+f"(d[26].y), "+f"(d[27].x), "+f"(d[27].y), "+f"(d[28].x), "+f"(d[28].y), "+f"(d[29].x), "+f"(d[29].y), "+f"(d[30].x), "+f"(d[30].y), "+f"(d[31].x), "+f"(d[31].y), "+f"(d[32].x), "+f"(d[32].y), "+f"(d[33].x), "+f"(d[33].y), "+f"(d[34].x), "+f"(d[34].y), "+f"(d[35].x), "+f"(d[35].y), "+f"(d[36].x), "+f"(d[36].y), "+f"(d[37].x), "+f"(d[37].y), "+f"(d[38].x), "+f"(d[38].y), "+f"(d[39].x), "+f"(d[39].y), "+f"(d[40].x), "+f"(d[40].y), "+f"(d[41].x), "+f"(d[41].y), "+f"(d[42].x), "+f"(d[42].y), "+f"(d[43].x), "+f"(d[43].y)
template <int TA, int TB> struct wgmma_ss<176, bf16, TA, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[44], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %90, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n176k16.f32.bf16.bf16 " TILES_WGMMA_D176
                 ", %88, %89, p, 1, 1, %91, %92;\n}\n"
                 : TILES_WGMMA_OPS176(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};
template <int TB> struct wgmma_rs<176, bf16, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[44], const u32 (&a)[4], u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %93, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n176k16.f32.bf16.bf16 " TILES_WGMMA_D176
                 ", {%88, %89, %90, %91}, %92, p, 1, 1, %94;\n}\n"
                 : TILES_WGMMA_OPS176(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
  }
};
template <int TA, int TB> struct wgmma_ss<176, f16, TA, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[44], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %90, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n176k16.f32.f16.f16 " TILES_WGMMA_D176
                 ", %88, %89, p, 1, 1, %91, %92;\n}\n"
                 : TILES_WGMMA_OPS176(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};
template <int TB> struct wgmma_rs<176, f16, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[44], const u32 (&a)[4], u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %93, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n176k16.f32.f16.f16 " TILES_WGMMA_D176
                 ", {%88, %89, %90, %91}, %92, p, 1, 1, %94;\n}\n"
                 : TILES_WGMMA_OPS176(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
  }
};
// ---- N = 192: 96 accumulators per thread
#define TILES_WGMMA_D192 "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95" "}"
#define TILES_WGMMA_OPS192(d) "+f"(d[0].x), "+f"(d[0].y), "+f"(d[1].x), "+f"(d[1].y), "+f"(d[2].x), "+f"(d[2].y), "+f"(d[3].x), "+f"(d[3].y), "+f"(d[4].x), "+f"(d[4].y), "+f"(d[5].x), "+f"(d[5].y), "+f"(d[6].x), "+f"(d[6].y), "+f"(d[7].x), "+f"(d[7].y), "+f"(d[8].x), "+f"(d[8].y), "+f"(d[9].x), "+f"(d[9].y), "+f"(d[10].x), "+f"(d[10].y), "+f"(d[11].x), "+f"(d[11].y), "+f"(d[12].x), "+f"(d[12].y), "+f"(d[13].x), "+f"(d[13].y), "+f"(d[14].x), "+f"(d[14].y), "+f"(d[15].x), "+f"(d[15].y), "+f"(d[16].x), "+f"(d[16].y), "+f"(d[17].x), "+f"(d[17].y), "+f"(d[18].x), "+f"(d[18].y), "+f"(d[19].x), "+f"(d[19].y), "+f"(d[20].x), "+f"(d[20].y), "+f"(d[21].x), "+f"(d[21].y), "+f"(d[22].x), "+f"(d[22].y), "+f"(d[23].x), "+f"(d[23].y), "+f"(d[24].x), "+f"(d[24].y), "+f"(d[25].x), "+f"(d[25].y), "+f"(d[26].x), "+f"(d[26].y), "+f"(d[27].x), "+f"(d[27].y), "+f"(d[28].x), "+f"(d[28].y), "+f"(d[29].x), "+f"(d[29].y), "+f"(d[30].x), "+f"(d[30].y), "+f"(d[31].x), "+f"(d[31].y), "+f"(d[32].x), "+f"(d[32].y), "+f"(d[33].x), "+f"(d[33].y), "+f"(d[34].x), "+f"(d[34].y), "+f"(d[35].x), "+f"(d[35].y), "+f"(d[36].x), "+f"(d[36].y), "+f"(d[37].x), "+f"(d[37].y), "+f"(d[38].x), "+f"(d[38].y), "+f"(d[39].x), "+f"(d[39].y), "+f"(d[40].x), "+f"(d[40].y), "+f"(d[41].x), "+f"(d[41].y), "+f"(d[42].x), "+f"(d[42].y), "+f"(d[43].x), "+f"(d[43].y), "+f"(d[44].x), "+f"(d[44].y), "+f"(d[45].x), "+f"(d[45].y), "+f"(d[46].x), "+f"(d[46].y), "+f"(d[47].x), "+f"(d[47].y)
template <int TA, int TB> struct wgmma_ss<192, bf16, TA, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[48], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %98, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 " TILES_WGMMA_D192
                 ", %96, %97, p, 1, 1, %99, %100;\n}\n"
                 : TILES_WGMMA_OPS192(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};
template <int TB> struct wgmma_rs<192, bf16, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[48], const u32 (&a)[4], u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %101, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 " TILES_WGMMA_D192
                 ", {%96, %97, %98, %99}, %100, p, 1, 1, %102;\n}\n"
                 : TILES_WGMMA_OPS192(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
  }
};
template <int TA, int TB> struct wgmma_ss<192, f16, TA, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[48], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %98, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 " TILES_WGMMA_D192
                 ", %96, %97, p, 1, 1, %99, %100;\n}\n"
                 : TILES_WGMMA_OPS192(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};
template <int TB> struct wgmma_rs<192, f16, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[48], const u32 (&a)[4], u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %101, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 " TILES_WGMMA_D192
                 ", {%96, %97, %98, %99}, %100, p, 1, 1, %102;\n}\n"
                 : TILES_WGMMA_OPS192(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
  }
};
// ---- N = 256: 128 accumulators per thread
#define TILES_WGMMA_D256 "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" "}"
#define TILES_WGMMA_OPS256(d) "+f"(d[0].x), "+f"(d[0].y), "+f"(d[1].x), "+f"(d[1].y), "+f"(d[2].x), "+f"(d[2].y), "+f"(d[3].x), "+f"(d[3].y), "+f"(d[4].x), "+f"(d[4].y), "+f"(d[5].x), "+f"(d[5].y), "+f"(d[6].x), "+f"(d[6].y), "+f"(d[7].x), "+f"(d[7].y), "+f"(d[8].x), "+f"(d[8].y), "+f"(d[9].x), "+f"(d[9].y), "+f"(d[10].x), "+f"(d[10].y), "+f"(d[11].x), "+f"(d[11].y), "+f"(d[12].x), "+f"(d[12].y), "+f"(d[13].x), "+f"(d[13].y), "+f"(d[14].x), "+f"(d[14].y), "+f"(d[15].x), "+f"(d[15].y), "+f"(d[16].x), "+f"(d[16].y), "+f"(d[17].x), "+f"(d[17].y), "+f"(d[18].x), "+f"(d[18].y), "+f"(d[19].x), "+f"(d[19].y), "+f"(d[20].x), "+f"(d[20].y), "+f"(d[21].x), "+f"(d[21].y), "+f"(d[22].x), "+f"(d[22].y), "+f"(d[23].x), "+f"(d[23].y), "+f"(d[24].x), "+f"(d[24].y), "+f"(d[25].x), "+f"(d[25].y), "+f"(d[26].x), "+f"(d[26].y), "+f"(d[27].x), "+f"(d[27].y), "+f"(d[28].x), "+f"(d[28].y), "+f"(d[29].x), "+f"(d[29].y), "+f"(d[30].x), "+f"(d[30].y), "+f"(d[31].x), "+f"(d[31].y), "+f"(d[32].x), "+f"(d[32].y), "+f"(d[33].x), "+f"(d[33].y), "+f"(d[34].x), "+f"(d[34].y), "+f"(d[35].x), "+f"(d[35].y), "+f"(d[36].x), "+f"(d[36].y), "+f"(d[37].x), "+f"(d[37].y), "+f"(d[38].x), "+f"(d[38].y), "+f"(d[39].x), "+f"(d[39].y), "+f"(d[40].x), "+f"(d[40].y), "+f"(d[41].x), "+f"(d[41].y), "+f"(d[42].x), "+f"(d[42].y), "+f"(d[43].x), "+f"(d[43].y), "+f"(d[44].x), "+f"(d[44].y), "+f"(d[45].x), "+f"(d[45].y), "+f"(d[46].x), "+f"(d[46].y), "+f"(d[47].x), "+f"(d[47].y), "+f"(d[48].x), "+f"(d[48].y), "+f"(d[49].x), "+f"(d[49].y), "+f"(d[50].x), "+f"(d[50].y), "+f"(d[51].x), "+f"(d[51].y), "+f"(d[52].x), "+f"(d[52].y), "+f"(d[53].x), "+f"(d[53].y), "+f"(d[54].x), "+f"(d[54].y), "+f"(d[55].x), "+f"(d[55].y), "+f"(d[56].x), "+f"(d[56].y), "+f"(d[57].x), "+f"(d[57].y), "+f"(d[58].x), "+f"(d[58].y), "+f"(d[59].x), "+f"(d[59].y), "+f"(d[60].x), "+f"(d[60].y), "+f"(d[61].x), "+f"(d[61].y), "+f"(d[62].x), "+f"(d[62].y), "+f"(d[63].x), "+f"(d[63].y)
template <int TA, int TB> struct wgmma_ss<256, bf16, TA, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[64], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " TILES_WGMMA_D256
                 ", %128, %129, p, 1, 1, %131, %132;\n}\n"
                 : TILES_WGMMA_OPS256(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};
template <int TB> struct wgmma_rs<256, bf16, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[64], const u32 (&a)[4], u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %133, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " TILES_WGMMA_D256
                 ", {%128, %129, %130, %131}, %132, p, 1, 1, %134;\n}\n"
                 : TILES_WGMMA_OPS256(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
  }
};
template <int TA, int TB> struct wgmma_ss<256, f16, TA, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[64], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " TILES_WGMMA_D256
                 ", %128, %129, p, 1, 1, %131, %132;\n}\n"
                 : TILES_WGMMA_OPS256(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TA), "n"(TB));
  }
};
template <int TB> struct wgmma_rs<256, f16, TB> {
  static __device__ __forceinline__ void run(float2 (&d)[64], const u32 (&a)[4], u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %133, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " TILES_WGMMA_D256
                 ", {%128, %129, %130, %131}, %132, p, 1, 1, %134;\n}\n"
                 : TILES_WGMMA_OPS256(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TB));
  }
};
template <> struct wgmma_ss<64, fp8e4m3, 0, 0> {
  static __device__ __forceinline__ void run(float2 (&d)[16], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " TILES_WGMMA_D64
                 ", %32, %33, p, 1, 1;\n}\n"
                 : TILES_WGMMA_OPS64(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  }
};
template <> struct wgmma_ss<96, fp8e4m3, 0, 0> {
  static __device__ __forceinline__ void run(float2 (&d)[24], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %50, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n96k32.f32.e4m3.e4m3 " TILES_WGMMA_D96
                 ", %48, %49, p, 1, 1;\n}\n"
                 : TILES_WGMMA_OPS96(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  }
};
template <> struct wgmma_ss<128, fp8e4m3, 0, 0> {
  static __device__ __forceinline__ void run(float2 (&d)[32], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " TILES_WGMMA_D128
                 ", %64, %65, p, 1, 1;\n}\n"
                 : TILES_WGMMA_OPS128(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  }
};
template <> struct wgmma_ss<192, fp8e4m3, 0, 0> {
  static __device__ __forceinline__ void run(float2 (&d)[48], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %98, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 " TILES_WGMMA_D192
                 ", %96, %97, p, 1, 1;\n}\n"
                 : TILES_WGMMA_OPS192(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  }
};
template <> struct wgmma_ss<256, fp8e4m3, 0, 0> {
  static __device__ __forceinline__ void run(float2 (&d)[64], u64 desc_a, u64 desc_b, int scale_d) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 " TILES_WGMMA_D256
                 ", %128, %129, p, 1, 1;\n}\n"
                 : TILES_WGMMA_OPS256(d)
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  }
};
// END GENERATED wgmma

}  // namespace arch
}  // namespace tiles
