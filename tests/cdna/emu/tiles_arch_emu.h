// CPU emulation of tiles/arch.h (the CDNA arch layer), for tests: the rest of the device headers and the
// generated kernels compile unchanged as host C++ (-DTILES_EMU -DTILES_ARCH_OVERRIDE='"tiles_arch_emu.h"').
//
// Every work-item is a fiber (ucontext) on one OS thread; a scheduler runs them round-robin, and they
// yield only at barriers: s_barrier (the work-group) and wave-wide collectives (MFMA, cross-lane moves,
// readfirstlane), which exchange values through per-wave slots between two wave barriers.
// The MFMA semantics are written here from the ISA definitions (AMD Matrix Instruction Calculator, gfx9
// algorithm), independently of layouts.py and rt.h: A[i][k] is in lane i + M*(k/kl), element k%kl; the
// 32-bit C/D element (i, j) is in lane j + N*((i/4) % (64/N)), register 4*(i/(4*64/N)) + i%4.
// Memory operations complete immediately, so waits are no-ops (the schedule checker covers them).
#pragma once
#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#if !defined(TILES_EMU_ARCH)
#define TILES_EMU_ARCH 942
#endif

namespace tiles {
namespace emu {

struct Barrier {
  int expected = 0, arrived = 0;
  long gen = 0;
};
struct Fiber {
  ucontext_t ctx;
  unsigned tid = 0;
  bool done = false;
};
// fiber stacks, allocated once (uninitialised) and reused by every block
inline constexpr size_t kStack = 128 * 1024;
inline std::vector<char*> g_stacks;
struct Block {
  unsigned block_id = 0, threads = 0, block_id_y = 0, block_id_z = 0;
  std::vector<Fiber> fibers;
  Barrier block_barrier;
  std::vector<Barrier> wave_barrier;
  // per-wave exchange slots: up to 32 32-bit values per lane
  std::vector<uint32_t> slots;
  ucontext_t sched;
  int current = -1;
  uintptr_t lds_hi = 0;
  long long barriers = 0;  // s_barrier executed (summed over work-items), for the tests
};
inline Block* g_block = nullptr;
inline long long g_progress = 0;  // arrivals at barriers + finished work-items: a round without it is a deadlock
inline void (*g_entry)() = nullptr;

inline Fiber& self() { return g_block->fibers[g_block->current]; }
inline void yield() { swapcontext(&self().ctx, &g_block->sched); }
inline void arrive(Barrier& b) {
  ++g_progress;
  const long my = b.gen;
  if (++b.arrived == b.expected) {
    b.arrived = 0;
    ++b.gen;
    return;
  }
  while (b.gen == my) yield();
}
inline void trampoline() {
  g_entry();
  self().done = true;
  ++g_progress;
  // leave the wave/block barriers consistent: a finished fiber never arrives again
  swapcontext(&self().ctx, &g_block->sched);
}
// run `body` (which calls the kernel) once per work-item of block (bid, bid_y, bid_z); returns the s_barrier count
inline long long run_block(unsigned bid, unsigned threads, void (*body)(), unsigned bid_y = 0, unsigned bid_z = 0) {
  Block b;
  b.block_id = bid;
  b.block_id_y = bid_y;
  b.block_id_z = bid_z;
  b.threads = threads;
  b.block_barrier.expected = (int)threads;
  b.wave_barrier.resize((threads + 63) / 64);
  for (auto& w : b.wave_barrier) w.expected = 64;
  b.slots.assign(((threads + 63) / 64) * 64 * 32, 0);
  b.fibers.resize(threads);
  g_block = &b;
  g_entry = body;
  while (g_stacks.size() < threads) g_stacks.push_back(new char[kStack]);
  for (unsigned t = 0; t < threads; ++t) {
    Fiber& f = b.fibers[t];
    f.tid = t;
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = g_stacks[t];
    f.ctx.uc_stack.ss_size = kStack;
    f.ctx.uc_link = &b.sched;
    makecontext(&f.ctx, trampoline, 0);
  }
  for (bool any = true; any;) {
    any = false;
    const long long before = g_progress;
    for (unsigned t = 0; t < threads; ++t) {
      if (b.fibers[t].done) continue;
      any = true;
      b.current = (int)t;
      swapcontext(&b.sched, &b.fibers[t].ctx);
    }
    if (any && g_progress == before) {
      std::fprintf(stderr, "emu: deadlock in block %u: work-items wait at a barrier no one else reaches (unbalanced s_barrier?)\n", bid);
      std::abort();
    }
  }
  for (auto& w : b.wave_barrier)
    if (w.arrived) { std::fprintf(stderr, "emu: a wave ended with work-items waiting at a wave barrier\n"); std::abort(); }
  if (b.block_barrier.arrived) { std::fprintf(stderr, "emu: work-items left waiting at s_barrier (unbalanced barriers)\n"); std::abort(); }
  g_block = nullptr;
  return b.barriers;
}

inline unsigned lane() { return self().tid & 63u; }
inline unsigned wave() { return self().tid >> 6; }
inline uint32_t* wave_slots(unsigned w) { return &g_block->slots[(size_t)w * 64 * 32]; }
// deposit n values, meet the wave, let `use` read every lane's values, meet again (slots reusable)
template <class F>
inline void wave_exchange(const uint32_t* mine, int n, F use) {
  uint32_t* s = wave_slots(wave());
  std::memcpy(s + lane() * 32, mine, n * 4);
  arrive(g_block->wave_barrier[wave()]);
  use(s);
  arrive(g_block->wave_barrier[wave()]);
}

inline float bf16f(uint32_t h) { uint32_t u = (h & 0xffffu) << 16; float f; std::memcpy(&f, &u, 4); return f; }
inline float f16f(uint32_t h) { _Float16 x; uint16_t v = (uint16_t)h; std::memcpy(&x, &v, 2); return (float)x; }

// hardware MFMA (gfx9 layout): M=N=MN, K, kl 16-bit values per lane per operand
template <bool BF16, int MN, int K>
inline void mfma(const uint32_t* a, const uint32_t* b, float* c) {
  constexpr int kl = K / (64 / MN), words = kl / 2, nreg = MN * MN / 64;
  uint32_t mine[16];
  for (int w = 0; w < words; ++w) { mine[w] = a[w]; mine[words + w] = b[w]; }
  float out[16];
  const unsigned l = lane();
  wave_exchange(mine, 2 * words, [&](const uint32_t* s) {
    auto val = [&](int ln, int side, int e) {
      uint32_t word = s[ln * 32 + side * words + e / 2];
      uint32_t h = (e & 1) ? word >> 16 : word & 0xffffu;
      return BF16 ? bf16f(h) : f16f(h);
    };
    for (int r = 0; r < nreg; ++r) {
      const int i = 4 * (64 / MN) * (r / 4) + 4 * (int)((l / MN) % (64 / MN)) + r % 4;
      const int j = (int)(l % MN);
      float acc = c[r];
      for (int k = 0; k < K; ++k) acc += val(i + MN * (k / kl), 0, k % kl) * val(j + MN * (k / kl), 1, k % kl);
      out[r] = acc;
    }
  });
  for (int r = 0; r < nreg; ++r) c[r] = out[r];
}

// 8-bit floats as the arch's fp8 MFMA reads them, decoded from the formats' definitions (sign, 4 exponent
// bits, 3 mantissa bits; no infinities): gfx942 e4m3fnuz (bias 8, 0x80 is the only NaN, no -0), gfx950 OCP
// e4m3fn (bias 7, S.1111.111 is NaN).
inline float fp8f(uint32_t byte) {
  const uint32_t b = byte & 0xffu, e = (b >> 3) & 15u, m = b & 7u;
  const bool fnuz = TILES_EMU_ARCH == 942;
  if (fnuz ? b == 0x80u : (b & 0x7fu) == 0x7fu) return NAN;
  const int bias = fnuz ? 8 : 7;
  const double mag = e == 0 ? std::ldexp((double)m, 1 - bias - 3) : std::ldexp(8.0 + m, (int)e - bias - 3);
  return (float)((b & 0x80u) ? -mag : mag);
}
// one hardware fp8 MFMA (gfx9 layout): M=N=MN, K, kl = K/(64/MN) bytes per lane per operand (a, b: kl/4 words)
template <int MN, int K>
inline void mfma_fp8(const uint32_t* a, const uint32_t* b, float* c) {
  constexpr int kl = K / (64 / MN), words = kl / 4, nreg = MN * MN / 64;
  uint32_t mine[16];
  for (int w = 0; w < words; ++w) { mine[w] = a[w]; mine[words + w] = b[w]; }
  float out[16];
  const unsigned l = lane();
  wave_exchange(mine, 2 * words, [&](const uint32_t* s) {
    auto val = [&](int ln, int side, int e) { return fp8f(s[ln * 32 + side * words + e / 4] >> (8 * (e % 4))); };
    for (int r = 0; r < nreg; ++r) {
      const int i = 4 * (64 / MN) * (r / 4) + 4 * (int)((l / MN) % (64 / MN)) + r % 4;
      const int j = (int)(l % MN);
      float acc = c[r];
      for (int k = 0; k < K; ++k) acc += val(i + MN * (k / kl), 0, k % kl) * val(j + MN * (k / kl), 1, k % kl);
      out[r] = acc;
    }
  });
  for (int r = 0; r < nreg; ++r) c[r] = out[r];
}

}  // namespace emu

namespace arch {
inline constexpr int kArch = TILES_EMU_ARCH;
inline constexpr int kLdsBytes = TILES_EMU_ARCH == 950 ? 160 * 1024 : 64 * 1024;
inline constexpr int kWave = 64;

TILES_DEV u32 thread_id() { return emu::self().tid; }
TILES_DEV u32 block_id() { return emu::g_block->block_id; }
TILES_DEV u32 block_id_y() { return emu::g_block->block_id_y; }
TILES_DEV u32 block_id_z() { return emu::g_block->block_id_z; }
TILES_DEV u32 lane_id() { return emu::lane(); }
TILES_DEV u32 readfirstlane(u32 v) {
  u32 out = 0;
  emu::wave_exchange(&v, 1, [&](const uint32_t* s) { out = s[0]; });
  return out;
}
TILES_DEV u32 wave_id() { return readfirstlane(thread_id() / kWave); }

template <dt T>
TILES_DEV f32x16 mfma32(u32x4 a, u32x4 b, f32x16 c) {
  uint32_t av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
  float cv[16];
  for (int r = 0; r < 16; ++r) cv[r] = c[r];
  if (TILES_EMU_ARCH == 950) {
    emu::mfma<T == dt::bf16, 32, 16>(av, bv, cv);
  } else {  // two 32x32x8 on values 0-3 then 4-7, as the gfx942 arch layer issues them
    emu::mfma<T == dt::bf16, 32, 8>(av, bv, cv);
    emu::mfma<T == dt::bf16, 32, 8>(av + 2, bv + 2, cv);
  }
  f32x16 out;
  for (int r = 0; r < 16; ++r) out[r] = cv[r];
  return out;
}
template <dt T>
TILES_DEV f32x4 mfma16(u32x4 a, u32x4 b, f32x4 c) {
  uint32_t av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
  float cv[4] = {c.x, c.y, c.z, c.w};
  if (TILES_EMU_ARCH == 950) {
    emu::mfma<T == dt::bf16, 16, 32>(av, bv, cv);
  } else {
    emu::mfma<T == dt::bf16, 16, 16>(av, bv, cv);
    emu::mfma<T == dt::bf16, 16, 16>(av + 2, bv + 2, cv);
  }
  return f32x4{cv[0], cv[1], cv[2], cv[3]};
}

// fp8 step (arch.h mfma32_fp8 / mfma16_fp8): 32 bytes of A and B per lane. gfx942: four 32x32x16 / 16x16x32
// instructions on bytes 0-7, 8-15, 16-23, 24-31; gfx950: one 32x32x64 / 16x16x128 instruction on all 32.
template <int MN>
inline void fp8_step(u32x4 a0, u32x4 a1, u32x4 b0, u32x4 b1, float* c) {
  const uint32_t av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w}, bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
  if (TILES_EMU_ARCH == 950) {
    emu::mfma_fp8<MN, MN == 32 ? 64 : 128>(av, bv, c);
  } else {
    for (int q = 0; q < 4; ++q) emu::mfma_fp8<MN, MN == 32 ? 16 : 32>(av + 2 * q, bv + 2 * q, c);
  }
}
TILES_DEV f32x16 mfma32_fp8(u32x4 a0, u32x4 a1, u32x4 b0, u32x4 b1, f32x16 c) {
  float cv[16];
  for (int r = 0; r < 16; ++r) cv[r] = c[r];
  fp8_step<32>(a0, a1, b0, b1, cv);
  f32x16 out;
  for (int r = 0; r < 16; ++r) out[r] = cv[r];
  return out;
}
TILES_DEV f32x4 mfma16_fp8(u32x4 a0, u32x4 a1, u32x4 b0, u32x4 b1, f32x4 c) {
  float cv[4] = {c.x, c.y, c.z, c.w};
  fp8_step<16>(a0, a1, b0, b1, cv);
  return f32x4{cv[0], cv[1], cv[2], cv[3]};
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

// buffer resources: base + num_records; every dword is range-checked like the hardware's raw buffers
struct rsrc_t {
  char* base;
  u32 bytes;
};
inline constexpr u32 kOob = 0x80000000u;
TILES_DEV rsrc_t make_rsrc(const void* base, u32 bytes) { return rsrc_t{(char*)base, bytes}; }
// range check per dword (per 16-bit value for 2-byte accesses)
template <int N>
TILES_DEV void emu_load(rsrc_t r, u32 off, void* dst) {
  constexpr int unit = N >= 4 ? 4 : 2;
  for (int i = 0; i < N; i += unit) {
    const unsigned long long o = (unsigned long long)off + i;
    if (o + unit <= r.bytes) std::memcpy((char*)dst + i, r.base + o, unit); else std::memset((char*)dst + i, 0, unit);
  }
}
template <int N>
TILES_DEV void emu_store(rsrc_t r, u32 off, const void* src) {
  constexpr int unit = N >= 4 ? 4 : 2;
  for (int i = 0; i < N; i += unit) {
    const unsigned long long o = (unsigned long long)off + i;
    if (o + unit <= r.bytes) std::memcpy(r.base + o, (const char*)src + i, unit);
  }
}
TILES_DEV u32x4 buffer_load_b128(rsrc_t r, u32 voff, u32 soff = 0) { u32x4 v; emu_load<16>(r, voff + soff, &v); return v; }
TILES_DEV u32x2 buffer_load_b64(rsrc_t r, u32 voff, u32 soff = 0) { u32x2 v; emu_load<8>(r, voff + soff, &v); return v; }
TILES_DEV u32 buffer_load_b32(rsrc_t r, u32 voff, u32 soff = 0) { u32 v; emu_load<4>(r, voff + soff, &v); return v; }
TILES_DEV u16 buffer_load_b16(rsrc_t r, u32 voff, u32 soff = 0) { u16 v; emu_load<2>(r, voff + soff, &v); return v; }
TILES_DEV void buffer_load_b128_async(u32x4& d, rsrc_t r, u32 voff, u32 soff = 0) { d = buffer_load_b128(r, voff, soff); }
TILES_DEV void buffer_store_b128(u32x4 v, rsrc_t r, u32 voff, u32 soff = 0) { emu_store<16>(r, voff + soff, &v); }
TILES_DEV void buffer_store_b64(u32x2 v, rsrc_t r, u32 voff, u32 soff = 0) { emu_store<8>(r, voff + soff, &v); }
TILES_DEV void buffer_store_b32(u32 v, rsrc_t r, u32 voff, u32 soff = 0) { emu_store<4>(r, voff + soff, &v); }
TILES_DEV void buffer_store_b16(u16 v, rsrc_t r, u32 voff, u32 soff = 0) { emu_store<2>(r, voff + soff, &v); }

// LDS: 32-bit offsets; the high half of the address comes from the block's LDS array
TILES_DEV u32 lds_addr(const void* p) {
  const uintptr_t a = (uintptr_t)p;
  emu::g_block->lds_hi = a & ~(uintptr_t)0xffffffffu;
  return (u32)a;
}
template <class T> TILES_DEV T* lds_ptr(u32 a) { return (T*)(emu::g_block->lds_hi | a); }
TILES_DEV u32x4 lds_read_b128(u32 a) { u32x4 v; std::memcpy(&v, lds_ptr<char>(a), 16); return v; }
TILES_DEV u32x2 lds_read_b64(u32 a) { u32x2 v; std::memcpy(&v, lds_ptr<char>(a), 8); return v; }
TILES_DEV u32 lds_read_b32(u32 a) { u32 v; std::memcpy(&v, lds_ptr<char>(a), 4); return v; }
TILES_DEV void lds_write_b128(u32 a, u32x4 v) { std::memcpy(lds_ptr<char>(a), &v, 16); }
TILES_DEV void lds_write_b64(u32 a, u32x2 v) { std::memcpy(lds_ptr<char>(a), &v, 8); }
TILES_DEV void lds_write_b32(u32 a, u32 v) { std::memcpy(lds_ptr<char>(a), &v, 4); }
#if TILES_EMU_ARCH == 950
TILES_DEV void buffer_load_lds_b128(rsrc_t r, u32 voff, u32 lds, u32 soff = 0) {
  u32x4 v = buffer_load_b128(r, voff, soff);
  lds_write_b128(lds + 16u * lane_id(), v);
}
#endif

template <int N> TILES_DEV void wait_vmcnt() {}
template <int N> TILES_DEV void wait_lgkmcnt() {}
TILES_DEV void compiler_fence() {}
TILES_DEV void barrier() {
  ++emu::g_block->barriers;
  emu::arrive(emu::g_block->block_barrier);
}
template <int MASK> TILES_DEV void sched_barrier() {}
template <int MASK, int COUNT, int GROUP> TILES_DEV void sched_group_barrier() {}
template <int P> TILES_DEV void setprio() {}

template <int MASK> TILES_DEV float shfl_xor(float v) {
  static_assert(MASK == 1 || MASK == 2 || MASK == 4 || MASK == 8 || MASK == 16 || MASK == 32, "mask");
  uint32_t x;
  std::memcpy(&x, &v, 4);
  uint32_t out = 0;
  emu::wave_exchange(&x, 1, [&](const uint32_t* s) { out = s[(emu::lane() ^ MASK) * 32]; });
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}
TILES_DEV float shfl(float v, u32 src) {
  uint32_t x, out = 0;
  std::memcpy(&x, &v, 4);
  emu::wave_exchange(&x, 1, [&](const uint32_t* s) { out = s[(src & 63u) * 32]; });
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

TILES_DEV float exp2(float x) { return std::exp2(x); }
TILES_DEV float log2(float x) { return std::log2(x); }
TILES_DEV float rcp(float x) { return 1.0f / x; }
TILES_DEV float rsqrt(float x) { return 1.0f / std::sqrt(x); }

TILES_DEV u16 f32_to_bf16(float f) {
  u32 u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40);
  return (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
TILES_DEV u16 f32_to_f16(float f) { _Float16 h = (_Float16)f; u16 v; std::memcpy(&v, &h, 2); return v; }
TILES_DEV float bf16_to_f32(u16 h) { return emu::bf16f(h); }
TILES_DEV float f16_to_f32(u16 h) { return emu::f16f(h); }

}  // namespace arch
}  // namespace tiles
