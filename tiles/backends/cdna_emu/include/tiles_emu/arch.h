// tiles cdna-emu: the CDNA arch layer (tiles/backends/cdna/include/tiles/arch.h) implemented in CUDA, so
// the kernels the CDNA lowering generates run unchanged on an NVIDIA GPU. Used for testing only.
//
// It is included ahead of the generated source (with TILES_EMU_CUDA and __gfx942__ or __gfx950__
// defined), declares what tiles/prelude.h would, and implements arch.h's API with the hardware's
// semantics where they decide whether a kernel is right:
//  * a wave is 64 lanes = two warps, met by a named barrier (bar.sync wave, 64) at every wave-wide
//    operation: MFMA, cross-lane moves, readfirstlane, s_waitcnt lgkmcnt, s_barrier;
//  * MFMA is computed from the ISA's lane layouts (gfx9 MFMA: A[i][k] in lane i + MN*(k/kl), element k%kl;
//    B[k][j] in lane j + MN*(k/kl); D element (i, j) in lane j + MN*((i/4) % (64/MN)), register
//    4*(i / (4*64/MN)) + i%4), written here and not taken from layouts.py or rt.h, so a wrong table there
//    shows up as a wrong answer;
//  * buffer loads range-check every dword against num_records: outside, they read 0 and stores are dropped;
//  * a load the kernel waits for itself (buffer_load_b128_async, buffer_load_lds_b128) lands only at the
//    s_waitcnt vmcnt that covers it; until then its destination holds poison (all ones: NaN in bf16, f16
//    and f32). vmcnt counts every vector-memory instruction in issue order, stores included (gfx9 has no
//    separate store counter). A load whose value the compiler waits for (buffer_load_b*) lands at once,
//    and with it every older one, as the compiler's own s_waitcnt would make them;
//  * LDS is capped at the target's size (64 KiB gfx942, 160 KiB gfx950): an allocation past it does not
//    compile, an access past it (or misaligned) is reported; the two warps of a wave are ordered at every
//    s_waitcnt lgkmcnt and s_barrier;
//  * s_barrier counts waves as the hardware does: it opens when every wave that has not ended arrived.
//    On exit the waves must have executed the same number of s_barriers (the ping-pong schedules promise
//    it); an s_barrier nobody else reaches is reported after a timeout instead of hanging (the named
//    barriers that pair a wave's two warps have no timeout: wave-uniform control flow is assumed);
//  * s_setprio and sched_barrier / sched_group_barrier do nothing.
// Not emulated: timing, instruction scheduling, register allocation (AGPR vs VGPR), LDS bank conflicts.
// Errors are recorded in tiles_emu_status (read by the host after the launch: cdna_emu/backend.py).
#pragma once

#define TILES_DEV static __device__ __forceinline__
#define TILES_HD static __host__ __device__ __forceinline__ constexpr
#define TILES_KERNEL(threads) extern "C" __global__ __launch_bounds__(threads)
#define TILES_ONE_WAVE_PER_SIMD

// clang builtins the CDNA headers use that NVRTC does not know
#define __builtin_inff() __int_as_float(0x7f800000)
#define __builtin_fabsf(x) fabsf(x)
#define __builtin_fmaxf(a, b) fmaxf(a, b)
#define __builtin_fminf(a, b) fminf(a, b)

typedef unsigned int u32;
typedef unsigned short u16;

namespace tiles {

// clang's ext_vector_type, as far as the headers use it: brace initialisation and element access
template <class T, int N>
struct vec {
  T e[N];
  __device__ __forceinline__ T& operator[](int i) { return e[i]; }
  __device__ __forceinline__ const T& operator[](int i) const { return e[i]; }
};
}  // namespace tiles
typedef tiles::vec<u32, 2> u32x2;
typedef tiles::vec<u32, 4> u32x4;
typedef tiles::vec<int, 4> i32x4;
typedef tiles::vec<short, 4> s16x4;
typedef tiles::vec<float, 4> f32x4;
typedef tiles::vec<float, 16> f32x16;

// tiles/prelude.h (dt, cond) and the numbers arch.h shares with every implementation (waitcnt_imm, kVmMax,
// kLgkmMax, sched masks); under TILES_EMU_CUDA both leave the rest to this file.
#include "tiles/arch.h"

#if defined(__gfx950__)
#define TILES_EMU_GFX 950
#elif defined(__gfx942__)
#define TILES_EMU_GFX 942
#else
#error "cdna-emu: define __gfx942__ or __gfx950__ (the target whose kernels are emulated)"
#endif

// first error of the launch: code, block (linear), wave, detail
extern "C" {
__device__ unsigned tiles_emu_status[4];
}

namespace tiles {
namespace emu {

enum error : unsigned {
  kOk = 0,
  kBarrierTimeout = 1,    // an s_barrier no other wave reached
  kBarrierUnbalanced = 2, // the waves ended having executed different numbers of s_barrier
  kLdsOutOfRange = 3,     // an LDS access past the target's LDS (or misaligned)
};

inline constexpr int kLdsBytes = TILES_EMU_GFX == 950 ? 160 * 1024 : 64 * 1024;
inline constexpr int kMaxWaves = 16;       // 1024 work-items; wave w meets on named barrier w
inline constexpr int kSlotWords = 8;       // per lane: one MFMA's A and B (4 + 4 words)
inline constexpr int kQueue = 64;          // vmcnt counts to 63
inline constexpr u32 kPoison = 0xffffffffu;
inline constexpr unsigned long long kBarrierTimeoutNs = 10ull * 1000 * 1000 * 1000;

// One vector-memory instruction in flight: where its data goes when it lands.
struct inflight {
  u32* reg;      // register destination (nullptr: an LDS destination or a store)
  u32 lds;       // LDS byte offset when reg == nullptr and words > 0
  int words;     // 0: nothing to deliver (a store, or a load already delivered)
  u32 data[4];
};
struct lane_state {
  inflight q[kQueue];
  int head = 0, n = 0;     // ring of the instructions this lane has in flight, oldest at head
  unsigned barriers = 0;   // s_barriers executed
};
// Block-wide emulator state, in dynamic shared memory after the kernel's LDS.
struct block_state {
  unsigned barrier;        // arrivals (low 16 bits) + ended waves (high 16 bits)
  volatile unsigned gen;   // s_barrier generation
  volatile unsigned abort; // a barrier timed out: every later barrier returns at once
  unsigned counts[kMaxWaves];
  lane_state* lanes[kMaxWaves * 64];
  u32 slots[kMaxWaves * kSlotWords * 64];
};
inline constexpr int kStateBytes = (sizeof(block_state) + 15) / 16 * 16;
inline constexpr int kDynamicBytes = kLdsBytes + kStateBytes;
}  // namespace emu
}  // namespace tiles
extern "C" {
__device__ unsigned tiles_emu_dynamic_bytes = tiles::emu::kDynamicBytes;  // what the host launches with
}
namespace tiles {
namespace emu {

extern __shared__ __align__(16) unsigned char dyn_smem[];
__device__ __forceinline__ block_state& state() { return *reinterpret_cast<block_state*>(dyn_smem + kLdsBytes); }
__device__ __forceinline__ unsigned char* lds_base() { return dyn_smem; }
__device__ __forceinline__ u32 tid() { return threadIdx.x; }
__device__ __forceinline__ u32 lane() { return threadIdx.x & 63u; }
__device__ __forceinline__ u32 wave() { return threadIdx.x >> 6; }
__device__ __forceinline__ u32 waves() { return (blockDim.x + 63) / 64; }
__device__ __forceinline__ lane_state& me() { return *state().lanes[tid()]; }

__device__ __forceinline__ void fail(unsigned code, unsigned detail) {
  if (atomicCAS(&tiles_emu_status[0], 0u, code) == 0u) {
    tiles_emu_status[1] = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    tiles_emu_status[2] = wave();
    tiles_emu_status[3] = detail;
  }
}

// the two warps of this wave meet (both must reach it: wave-uniform control flow, as on the hardware)
__device__ __forceinline__ void wave_sync() {
  __syncwarp();
  asm volatile("bar.sync %0, 64;" ::"r"(wave()) : "memory");
}

// ------------------------------------------------------------------ loads in flight
__device__ __forceinline__ void deliver(inflight& f) {
  if (f.words == 0) return;
  if (f.reg) {
    for (int i = 0; i < f.words; ++i) f.reg[i] = f.data[i];
  } else {
    u32* p = reinterpret_cast<u32*>(lds_base() + f.lds);
    for (int i = 0; i < f.words; ++i) p[i] = f.data[i];
  }
  f.words = 0;
}
// land the oldest instructions until at most `keep` are in flight
__device__ __noinline__ void retire(int keep) {
  lane_state& s = me();
  while (s.n > keep) {
    deliver(s.q[s.head]);
    s.head = (s.head + 1) % kQueue;
    --s.n;
  }
}
__device__ __forceinline__ inflight& issue() {
  lane_state& s = me();
  if (s.n == kQueue) retire(kQueue - 1);  // the counter saturates: the hardware stalls until one lands
  inflight& f = s.q[(s.head + s.n) % kQueue];
  ++s.n;
  f.reg = nullptr;
  f.words = 0;
  return f;
}

// ------------------------------------------------------------------ s_barrier
__device__ __forceinline__ void release(block_state& b, unsigned arrived) {
  atomicSub(&b.barrier, arrived);
  __threadfence_block();
  b.gen = b.gen + 1;
}
// lane 0 of a wave arrives; returns when the barrier opened (or timed out)
__device__ __noinline__ void arrive_wave() {
  block_state& b = state();
  if (b.abort) return;
  const unsigned gen = b.gen;
  __threadfence_block();
  const unsigned now = atomicAdd(&b.barrier, 1u) + 1u;
  const unsigned arrived = now & 0xffffu, ended = now >> 16;
  if (arrived + ended == waves()) {
    release(b, arrived);
    return;
  }
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  while (b.gen == gen && !b.abort) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > kBarrierTimeoutNs) {
      fail(kBarrierTimeout, b.counts[wave()]);
      b.abort = 1;
    }
  }
  __threadfence_block();
}
// a wave ends: it no longer counts towards s_barrier; the last one checks that all executed as many
__device__ __forceinline__ void end_wave(unsigned barriers) {
  block_state& b = state();
  b.counts[wave()] = barriers;
  __threadfence_block();
  const unsigned now = atomicAdd(&b.barrier, 1u << 16) + (1u << 16);
  const unsigned arrived = now & 0xffffu, ended = now >> 16;
  if (arrived > 0 && arrived + ended == waves()) release(b, arrived);
  if (ended == waves()) {
    for (unsigned w = 1; w < waves(); ++w)
      if (b.counts[w] != b.counts[0]) fail(kBarrierUnbalanced, (w << 16) | (b.counts[w] & 0xffffu));
  }
}

// Declared by TILES_SHARED / TILES_NO_SHARED at the top of every kernel: sets up the block's state,
// and when the kernel returns, ends the wave.
struct scope {
  lane_state mine;
  __device__ scope() {
    block_state& b = state();
    if (tid() == 0) {
      b.barrier = 0;
      b.gen = 0;
      b.abort = 0;
    }
    b.lanes[tid()] = &mine;
    __syncthreads();
  }
  __device__ ~scope() {
    wave_sync();
    if (lane() == 0) end_wave(mine.barriers);
  }
};

// ------------------------------------------------------------------ value conversions
__device__ __forceinline__ float bf16f(u32 h) { return __uint_as_float((h & 0xffffu) << 16); }
__device__ __forceinline__ float f16f(u32 h) {
  float f;
  const unsigned short x = (unsigned short)h;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
  return f;
}

// ------------------------------------------------------------------ MFMA (gfx9 lane layouts, from the ISA)
// D = A B + C for one MN x MN x K instruction whose operands are words [w0, w0 + kl/2) of every lane's slots
// (A in words 0..3, B in words 4..7).
template <bool BF16, int MN, int K, int NREG>
__device__ __forceinline__ void mfma_from_slots(const u32* s, int w0, float* c) {
  constexpr int groups = 64 / MN, kl = K / groups;
  const int l = (int)lane();
  auto val = [&](int ln, int side, int e) {
    const u32 word = s[(side * 4 + w0 + e / 2) * 64 + ln];
    const u32 h = (e & 1) ? word >> 16 : word & 0xffffu;
    return BF16 ? bf16f(h) : f16f(h);
  };
  for (int r = 0; r < NREG; ++r) {
    const int i = 4 * groups * (r / 4) + 4 * ((l / MN) % groups) + r % 4, j = l % MN;
    float acc = c[r];
#pragma unroll 1
    for (int k = 0; k < K; ++k) acc = fmaf(val(i + MN * (k / kl), 0, k % kl), val(j + MN * (k / kl), 1, k % kl), acc);
    c[r] = acc;
  }
}
// Every lane deposits its 16-byte A and B chunks, the wave meets, each lane computes its D registers
// (gfx950: one MN x MN x 2K' instruction on all 8 values; gfx942: two, on values 0-3 then 4-7).
// Not inlined: one copy per MFMA shape keeps the emulated kernels quick to compile.
template <bool BF16, int MN, int NREG>
__device__ __noinline__ void mfma(const u32x4 a, const u32x4 b, float* c) {
  u32* s = state().slots + wave() * kSlotWords * 64;
  for (int w = 0; w < 4; ++w) {
    s[w * 64 + lane()] = a[w];
    s[(4 + w) * 64 + lane()] = b[w];
  }
  wave_sync();
  constexpr int K942 = MN == 32 ? 8 : 16;  // v_mfma_f32_32x32x8 / 16x16x16 (4 values per lane)
  if (TILES_EMU_GFX == 950) {
    mfma_from_slots<BF16, MN, 2 * K942, NREG>(s, 0, c);
  } else {
    mfma_from_slots<BF16, MN, K942, NREG>(s, 0, c);
    mfma_from_slots<BF16, MN, K942, NREG>(s, 2, c);
  }
  wave_sync();
}

// ------------------------------------------------------------------ fp8 MFMA
// 8-bit floats as the arch's fp8 MFMA reads them, decoded from the formats' definitions (sign, 4 exponent
// bits, 3 mantissa bits, no infinities): gfx942 e4m3fnuz (bias 8, 0x80 the only NaN), gfx950 OCP e4m3fn
// (bias 7, S.1111.111 NaN).
__device__ __forceinline__ float fp8f(u32 byte) {
  const u32 b = byte & 0xffu, e = (b >> 3) & 15u, m = b & 7u;
  constexpr bool fnuz = TILES_EMU_GFX == 942;
  if (fnuz ? b == 0x80u : (b & 0x7fu) == 0x7fu) return __int_as_float(0x7fc00000);
  constexpr int bias = fnuz ? 8 : 7;
  const float mag = e == 0 ? ldexpf((float)m, 1 - bias - 3) : ldexpf(8.0f + (float)m, (int)e - bias - 3);
  return (b & 0x80u) ? -mag : mag;
}
// One hardware fp8 MFMA, MN x MN x K (gfx9 lane layout: A[i][k] is byte k % kl of lane i + MN*(k/kl), kl = K/(64/MN)
// bytes per lane; B[k][j] likewise in lane j + MN*(k/kl)), operands a, b of kl/4 words per lane. The words go
// through the slots 4 per operand at a time (a round covers bytes [16 r, 16 r + 16) of every lane's operand).
template <int MN, int K, int NREG>
__device__ __noinline__ void mfma_fp8(const u32* a, const u32* b, float* c) {
  constexpr int groups = 64 / MN, kl = K / groups, words = kl / 4, per = words < 4 ? words : 4;
  u32* s = state().slots + wave() * kSlotWords * 64;
  const int l = (int)lane();
  for (int r0 = 0; r0 < words; r0 += per) {
    for (int w = 0; w < per; ++w) {
      s[w * 64 + lane()] = a[r0 + w];
      s[(4 + w) * 64 + lane()] = b[r0 + w];
    }
    wave_sync();
    for (int r = 0; r < NREG; ++r) {
      const int i = 4 * groups * (r / 4) + 4 * ((l / MN) % groups) + r % 4, j = l % MN;
      float acc = c[r];
#pragma unroll 1
      for (int g = 0; g < groups; ++g)
#pragma unroll 1
        for (int e = 0; e < 4 * per; ++e) {  // byte 4 r0 + e of the lane's operand: k = g kl + 4 r0 + e
          const u32 wa = s[(e / 4) * 64 + i + MN * g], wb = s[(4 + e / 4) * 64 + j + MN * g];
          acc = fmaf(fp8f(wa >> (8 * (e % 4))), fp8f(wb >> (8 * (e % 4))), acc);
        }
      c[r] = acc;
    }
    wave_sync();
  }
}
// fp8 step (arch.h mfma32_fp8 / mfma16_fp8): 32 bytes of A and B per lane. gfx942: four 32x32x16 / 16x16x32
// instructions on bytes 0-7, 8-15, 16-23, 24-31; gfx950: one 32x32x64 / 16x16x128 instruction on all 32.
template <int MN, int NREG>
__device__ __forceinline__ void fp8_step(const u32x4& a0, const u32x4& a1, const u32x4& b0, const u32x4& b1, float* c) {
  const u32 av[8] = {a0[0], a0[1], a0[2], a0[3], a1[0], a1[1], a1[2], a1[3]};
  const u32 bv[8] = {b0[0], b0[1], b0[2], b0[3], b1[0], b1[1], b1[2], b1[3]};
  if (TILES_EMU_GFX == 950) {
    mfma_fp8<MN, MN == 32 ? 64 : 128, NREG>(av, bv, c);
  } else {
    for (int q = 0; q < 4; ++q) mfma_fp8<MN, MN == 32 ? 16 : 32, NREG>(av + 2 * q, bv + 2 * q, c);
  }
}

// one 32-bit value per lane through the slots: the value lane `src` holds
__device__ __noinline__ u32 exchange(u32 v, u32 src) {
  u32* s = state().slots + wave() * kSlotWords * 64;
  s[lane()] = v;
  wave_sync();
  const u32 out = s[src & 63u];
  wave_sync();
  return out;
}

}  // namespace emu

namespace arch {

inline constexpr int kArch = TILES_EMU_GFX;
inline constexpr int kLdsBytes = emu::kLdsBytes;
inline constexpr int kWave = 64;

// ------------------------------------------------------------------ ids
TILES_DEV u32 thread_id() { return threadIdx.x; }
TILES_DEV u32 block_id() { return blockIdx.x; }
TILES_DEV u32 block_id_y() { return blockIdx.y; }
TILES_DEV u32 block_id_z() { return blockIdx.z; }
TILES_DEV u32 lane_id() { return emu::lane(); }
TILES_DEV u32 readfirstlane(u32 v) { return emu::exchange(v, 0u); }
TILES_DEV u32 wave_id() { return readfirstlane(thread_id() / kWave); }

// ------------------------------------------------------------------ MFMA
template <dt T>
TILES_DEV f32x16 mfma32(u32x4 a, u32x4 b, f32x16 c) {
  emu::mfma<T == dt::bf16, 32, 16>(a, b, c.e);
  return c;
}
template <dt T>
TILES_DEV f32x4 mfma16(u32x4 a, u32x4 b, f32x4 c) {
  emu::mfma<T == dt::bf16, 16, 4>(a, b, c.e);
  return c;
}

// fp8 MFMA step (arch.h): the arch's 8-bit format, computed from the ISA lane layouts above
TILES_DEV f32x16 mfma32_fp8(u32x4 a0, u32x4 a1, u32x4 b0, u32x4 b1, f32x16 c) {
  emu::fp8_step<32, 16>(a0, a1, b0, b1, c.e);
  return c;
}
TILES_DEV f32x4 mfma16_fp8(u32x4 a0, u32x4 a1, u32x4 b0, u32x4 b1, f32x4 c) {
  emu::fp8_step<16, 4>(a0, a1, b0, b1, c.e);
  return c;
}

// arch.h materialize: a scheduling constraint only (registers and scheduling are not modelled)
TILES_DEV void materialize(f32x16&) {}
TILES_DEV void materialize(f32x4&) {}

// MFMA with the accumulator pinned in AGPRs (arch.h: inline asm with "a" constraints): the same ISA
// operation as mfma32 / mfma16, in place; registers are not modelled, so the pin and the hazard fence are no-ops
template <dt T>
TILES_DEV void mfma32_agpr(u32x4 a, u32x4 b, f32x16& c) { c = mfma32<T>(a, b, c); }
template <dt T>
TILES_DEV void mfma16_agpr(u32x4 a, u32x4 b, f32x4& c) { c = mfma16<T>(a, b, c); }
TILES_DEV void pin_agpr(f32x16&) {}
TILES_DEV void pin_agpr(f32x4&) {}
TILES_DEV void mfma_agpr_fence() {}

// ------------------------------------------------------------------ buffer (global) memory
struct rsrc_t {
  const unsigned char* base;
  u32 bytes;  // num_records
};
inline constexpr u32 kOob = 0x80000000u;
TILES_DEV rsrc_t make_rsrc(const void* base, u32 bytes) { return rsrc_t{(const unsigned char*)base, bytes}; }
// the hardware's range check, per dword (per 16-bit value for 2-byte accesses)
template <int BYTES>
__device__ __noinline__ void read_checked(rsrc_t r, u32 off, void* dst) {
  constexpr int unit = BYTES >= 4 ? 4 : 2;
  for (int i = 0; i < BYTES; i += unit) {
    const unsigned long long o = (unsigned long long)off + i;
    if (unit == 4) {  // a dword at any 2-byte alignment, as buffer loads allow
      ((u32*)dst)[i / 4] = o + 4 > r.bytes ? 0u
                           : (o & 3) ? (u32)*(const u16*)(r.base + o) | ((u32)*(const u16*)(r.base + o + 2) << 16)
                                     : *(const u32*)(r.base + o);
    } else {
      ((u16*)dst)[i / 2] = o + 2 <= r.bytes ? *(const u16*)(r.base + o) : (u16)0;
    }
  }
}
template <int BYTES>
__device__ __noinline__ void write_checked(rsrc_t r, u32 off, const void* src) {
  constexpr int unit = BYTES >= 4 ? 4 : 2;
  for (int i = 0; i < BYTES; i += unit) {
    const unsigned long long o = (unsigned long long)off + i;
    if (o + unit > r.bytes) continue;
    unsigned char* p = const_cast<unsigned char*>(r.base) + o;
    const u32 w = unit == 4 ? ((const u32*)src)[i / 4] : ((const u16*)src)[i / 2];
    if (unit == 4 && (o & 3) == 0) {
      *(u32*)p = w;
    } else if (unit == 4) {
      ((u16*)p)[0] = (u16)w;
      ((u16*)p)[1] = (u16)(w >> 16);
    } else {
      *(u16*)p = (u16)w;
    }
  }
  emu::issue();  // counted by vmcnt like a load; nothing to deliver
}
// loads the compiler waits for: this one and every older one land now
template <int BYTES, class V>
TILES_DEV V load_now(rsrc_t r, u32 off) {
  emu::retire(0);
  V v;
  read_checked<BYTES>(r, off, &v);
  return v;
}
TILES_DEV u32x4 buffer_load_b128(rsrc_t r, u32 voff, u32 soff = 0) { return load_now<16, u32x4>(r, voff + soff); }
TILES_DEV u32x2 buffer_load_b64(rsrc_t r, u32 voff, u32 soff = 0) { return load_now<8, u32x2>(r, voff + soff); }
TILES_DEV u32 buffer_load_b32(rsrc_t r, u32 voff, u32 soff = 0) { return load_now<4, u32>(r, voff + soff); }
TILES_DEV u16 buffer_load_b16(rsrc_t r, u32 voff, u32 soff = 0) { return load_now<2, u16>(r, voff + soff); }
// a load the kernel waits for itself: poison until the s_waitcnt vmcnt that covers it
TILES_DEV void buffer_load_b128_async(u32x4& d, rsrc_t r, u32 voff, u32 soff = 0) {
  emu::inflight& f = emu::issue();
  read_checked<16>(r, voff + soff, f.data);
  f.reg = d.e;
  f.words = 4;
  for (int i = 0; i < 4; ++i) d[i] = emu::kPoison;
}
TILES_DEV void buffer_store_b128(u32x4 v, rsrc_t r, u32 voff, u32 soff = 0) { write_checked<16>(r, voff + soff, &v); }
TILES_DEV void buffer_store_b64(u32x2 v, rsrc_t r, u32 voff, u32 soff = 0) { write_checked<8>(r, voff + soff, &v); }
TILES_DEV void buffer_store_b32(u32 v, rsrc_t r, u32 voff, u32 soff = 0) { write_checked<4>(r, voff + soff, &v); }
TILES_DEV void buffer_store_b16(u16 v, rsrc_t r, u32 voff, u32 soff = 0) { write_checked<2>(r, voff + soff, &v); }

// ------------------------------------------------------------------ LDS
// 32-bit byte offsets from the start of the kernel's allocation, as on the hardware
TILES_DEV u32 lds_addr(const void* p) { return (u32)((const unsigned char*)p - emu::lds_base()); }
template <int BYTES>
TILES_DEV unsigned char* lds_at(u32 a) {
  if (a + BYTES > (u32)kLdsBytes || (a & (BYTES - 1))) {
    emu::fail(emu::kLdsOutOfRange, a);
    return emu::lds_base();
  }
  return emu::lds_base() + a;
}
TILES_DEV u32x4 lds_read_b128(u32 a) { return *(const u32x4*)lds_at<16>(a); }
TILES_DEV u32x2 lds_read_b64(u32 a) { return *(const u32x2*)lds_at<8>(a); }
TILES_DEV u32 lds_read_b32(u32 a) { return *(const u32*)lds_at<4>(a); }
TILES_DEV void lds_write_b128(u32 a, u32x4 v) { *(u32x4*)lds_at<16>(a) = v; }
TILES_DEV void lds_write_b64(u32 a, u32x2 v) { *(u32x2*)lds_at<8>(a) = v; }
TILES_DEV void lds_write_b32(u32 a, u32 v) { *(u32*)lds_at<4>(a) = v; }
#if TILES_EMU_GFX == 950
// global -> LDS: lane i's 16 bytes land at lds + 16 i when the covering vmcnt wait retires the load
TILES_DEV void buffer_load_lds_b128(rsrc_t r, u32 voff, u32 lds, u32 soff = 0) {
  const u32 a = lds + 16u * lane_id();
  u32* dst = (u32*)lds_at<16>(a);
  emu::inflight& f = emu::issue();
  read_checked<16>(r, voff + soff, f.data);
  f.lds = (u32)((unsigned char*)dst - emu::lds_base());
  f.words = 4;
  for (int i = 0; i < 4; ++i) dst[i] = emu::kPoison;
}
#endif

// ------------------------------------------------------------------ waits, barriers, priorities
template <int N> TILES_DEV void wait_vmcnt() {
  static_assert(N >= 0 && N <= kVmMax, "vmcnt out of range");
  emu::retire(N);
}
template <int N> TILES_DEV void wait_lgkmcnt() {
  static_assert(N >= 0 && N <= kLgkmMax, "lgkmcnt out of range");
  emu::wave_sync();  // LDS operations of a wave issue in order: its two warps agree from here on
}
TILES_DEV void compiler_fence() { asm volatile("" ::: "memory"); }
TILES_DEV void barrier() {
  emu::wave_sync();
  if (emu::lane() == 0) emu::arrive_wave();
  ++emu::me().barriers;
  emu::wave_sync();
}
template <int MASK> TILES_DEV void sched_barrier() {}
template <int MASK, int COUNT, int GROUP> TILES_DEV void sched_group_barrier() {}
template <int P> TILES_DEV void setprio() {}

// ------------------------------------------------------------------ cross-lane
template <int MASK> TILES_DEV float shfl_xor(float v) {
  static_assert(MASK == 1 || MASK == 2 || MASK == 4 || MASK == 8 || MASK == 16 || MASK == 32,
                "shfl_xor: mask must be 1, 2, 4, 8, 16 or 32");
  if constexpr (MASK < 32) return __shfl_xor_sync(0xffffffffu, v, MASK);  // inside one warp
  else return __uint_as_float(emu::exchange(__float_as_uint(v), emu::lane() ^ 32u));
}
TILES_DEV float shfl(float v, u32 src) {
  return __uint_as_float(emu::exchange(__float_as_uint(v), src));
}

// ------------------------------------------------------------------ transcendental
TILES_DEV float exp2(float x) { return exp2f(x); }
TILES_DEV float log2(float x) { return log2f(x); }
TILES_DEV float rcp(float x) { return 1.0f / x; }
TILES_DEV float rsqrt(float x) { return rsqrtf(x); }

// ------------------------------------------------------------------ conversions (16-bit bit patterns)
TILES_DEV u16 f32_to_bf16(float f) {  // round to nearest even; quiet NaN stays NaN
  const u32 u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40);
  return (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
TILES_DEV u16 f32_to_f16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
TILES_DEV float bf16_to_f32(u16 h) { return emu::bf16f(h); }
TILES_DEV float f16_to_f32(u16 h) { return emu::f16f(h); }

}  // namespace arch
}  // namespace tiles

// the kernel's one LDS allocation lives at the start of dynamic shared memory, capped at the target's LDS
#define TILES_SHARED(type, name, count)                                                               \
  static_assert(sizeof(type) * (count) <= ::tiles::arch::kLdsBytes, "LDS allocation exceeds the target's LDS"); \
  ::tiles::emu::scope tiles_emu_scope_;                                                                \
  type* const name = reinterpret_cast<type*>(::tiles::emu::lds_base())
#define TILES_NO_SHARED(type, name) \
  ::tiles::emu::scope tiles_emu_scope_; \
  [[maybe_unused]] type* const name = nullptr
