// tiles CDNA arch layer: the ONLY header that spells vendor intrinsics.
// Everything above it (rt.h, st.h, ops.h, load.h, grid.h) is ordinary C++ over these functions, so the
// intrinsics stay auditable in one place and this file alone can be re-implemented for an emulator.
//
// Targets: gfx942 (CDNA3: MI300X/MI325X) and gfx950 (CDNA4: MI355X), selected by clang's __gfx9xx__ macros.
#pragma once
#include "prelude.h"

namespace tiles {
namespace arch {
// Numbers of the ISA every implementation of this layer shares (the emulators included).
// s_waitcnt immediate. gfx942 and gfx950 share the gfx9 encoding:
//   vmcnt = bits [3:0] + [15:14] (0..63), expcnt = [6:4] (0..7), lgkmcnt = [11:8] (0..15).
// A field at its maximum means "do not wait on this counter". schedule.py mirrors this (waitcnt_imm).
TILES_HD int waitcnt_imm(int vm, int exp, int lgkm) {
  return (vm & 0xF) | ((vm >> 4) << 14) | ((exp & 0x7) << 4) | ((lgkm & 0xF) << 8);
}
inline constexpr int kVmMax = 63, kLgkmMax = 15;
// sched_group_barrier masks (LLVM AMDGPU docs)
inline constexpr int kSchedMfma = 0x8, kSchedValu = 0x2, kSchedSalu = 0x4, kSchedVmemRead = 0x20,
                     kSchedVmemWrite = 0x40, kSchedDs = 0x80, kSchedDsRead = 0x100, kSchedDsWrite = 0x200,
                     kSchedTrans = 0x400;
}  // namespace arch
}  // namespace tiles

#if defined(TILES_ARCH_OVERRIDE)
// An alternative implementation of this exact API (e.g. the CPU emulator in tests/cdna/emu), which lets
// everything above this layer run unchanged off-GPU.
#include TILES_ARCH_OVERRIDE
#elif defined(TILES_EMU_CUDA)
// The same API emulated in CUDA (tiles/backends/cdna_emu/include/tiles_emu/arch.h), included ahead.
#else

#if defined(__AMDGCN__) && !defined(__gfx942__) && !defined(__gfx950__)
#error "tiles CDNA headers support gfx942 and gfx950 only"
#endif

#define TILES_LDS __attribute__((address_space(3)))

namespace tiles {
namespace arch {

#if defined(__gfx950__)
inline constexpr int kArch = 950;
inline constexpr int kLdsBytes = 160 * 1024;  // 160 KiB per CU
#else
inline constexpr int kArch = 942;
inline constexpr int kLdsBytes = 64 * 1024;
#endif
inline constexpr int kWave = 64;

// ------------------------------------------------------------------ ids
TILES_DEV u32 thread_id() { return __builtin_amdgcn_workitem_id_x(); }
TILES_DEV u32 block_id() { return __builtin_amdgcn_workgroup_id_x(); }
TILES_DEV u32 block_id_y() { return __builtin_amdgcn_workgroup_id_y(); }
TILES_DEV u32 block_id_z() { return __builtin_amdgcn_workgroup_id_z(); }
TILES_DEV u32 lane_id() { return __builtin_amdgcn_workitem_id_x() & (kWave - 1); }
// wave-uniform value into an SGPR (the compiler cannot prove uniformity of tid/64 by itself)
TILES_DEV u32 readfirstlane(u32 v) { return __builtin_amdgcn_readfirstlane(v); }
TILES_DEV u32 wave_id() { return readfirstlane(thread_id() / kWave); }

// ------------------------------------------------------------------ MFMA
// One "logical chunk": each lane holds 8 consecutive-k 16-bit values (16 bytes, one ds_read_b128).
//  gfx950: exactly one v_mfma_f32_32x32x16 / 16x16x32 (8 values per lane per instruction).
//  gfx942: two v_mfma_f32_32x32x8 / 16x16x16 on values 0-3 then 4-7. The k order differs from the
//          hardware's, identically for A and B, so the dot product is the same (layouts.logical_is_valid).
template <dt T>
TILES_DEV f32x16 mfma32(u32x4 a, u32x4 b, f32x16 c) {
#if defined(__gfx950__)
  typedef __bf16 bf16x8 __attribute__((ext_vector_type(8)));
  if constexpr (T == dt::bf16)
    return __builtin_amdgcn_mfma_f32_32x32x16_bf16(__builtin_bit_cast(bf16x8, a), __builtin_bit_cast(bf16x8, b), c, 0, 0, 0);
  else
    return __builtin_amdgcn_mfma_f32_32x32x16_f16(__builtin_bit_cast(f16x8, a), __builtin_bit_cast(f16x8, b), c, 0, 0, 0);
#else
  u32x2 alo = a.xy, ahi = a.zw, blo = b.xy, bhi = b.zw;
  if constexpr (T == dt::bf16) {
    c = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(__builtin_bit_cast(s16x4, alo), __builtin_bit_cast(s16x4, blo), c, 0, 0, 0);
    return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(__builtin_bit_cast(s16x4, ahi), __builtin_bit_cast(s16x4, bhi), c, 0, 0, 0);
  } else {
    c = __builtin_amdgcn_mfma_f32_32x32x8f16(__builtin_bit_cast(f16x4, alo), __builtin_bit_cast(f16x4, blo), c, 0, 0, 0);
    return __builtin_amdgcn_mfma_f32_32x32x8f16(__builtin_bit_cast(f16x4, ahi), __builtin_bit_cast(f16x4, bhi), c, 0, 0, 0);
  }
#endif
}

template <dt T>
TILES_DEV f32x4 mfma16(u32x4 a, u32x4 b, f32x4 c) {
#if defined(__gfx950__)
  typedef __bf16 bf16x8 __attribute__((ext_vector_type(8)));
  if constexpr (T == dt::bf16)
    return __builtin_amdgcn_mfma_f32_16x16x32_bf16(__builtin_bit_cast(bf16x8, a), __builtin_bit_cast(bf16x8, b), c, 0, 0, 0);
  else
    return __builtin_amdgcn_mfma_f32_16x16x32_f16(__builtin_bit_cast(f16x8, a), __builtin_bit_cast(f16x8, b), c, 0, 0, 0);
#else
  u32x2 alo = a.xy, ahi = a.zw, blo = b.xy, bhi = b.zw;
  if constexpr (T == dt::bf16) {
    c = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(__builtin_bit_cast(s16x4, alo), __builtin_bit_cast(s16x4, blo), c, 0, 0, 0);
    return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(__builtin_bit_cast(s16x4, ahi), __builtin_bit_cast(s16x4, bhi), c, 0, 0, 0);
  } else {
    c = __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(f16x4, alo), __builtin_bit_cast(f16x4, blo), c, 0, 0, 0);
    return __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(f16x4, ahi), __builtin_bit_cast(f16x4, bhi), c, 0, 0, 0);
  }
#endif
}

// ------------------------------------------------------------------ MFMA with the accumulator in AGPRs
// The same math as mfma32 / mfma16, spelled as inline asm whose C/D operand has the "a" constraint: the
// accumulator is read and written in place in AGPRs (4-wave interleave GEMM: one wave per SIMD owns all
// 512 registers, the accumulators fill the 256 AGPRs and everything else stays in the 256 VGPRs). With the
// builtins clang-22 selects the VGPR form of the MFMA and shuttles values between VGPRs and AGPRs with
// v_accvgpr_read/write inside the K loop; clang-19 did not. Rules for callers:
//  * pin_agpr(c) after initialising c and again before reading it back: the value lives in AGPRs across
//    the whole range (without the first pin clang-22 zeroes c in VGPRs and spills around the loop);
//  * mfma_agpr_fence() once after the initialising pin and once after the last MFMA, before c is read:
//    the compiler's hazard recognizer does not look inside inline asm, so the wait states between a VALU
//    write of C and an MFMA reading it, and between an MFMA writing C and a VALU / v_accvgpr_read reading
//    it (at most 16 passes + 4 on gfx950), are covered here by 24 s_nop wait states. Back-to-back MFMAs
//    that accumulate into exactly the same registers need none (ISA: SrcC fully overlapping vDst).
//  * the A / B operands must not be written by a VALU instruction in the 2 instructions before the MFMA
//    (they come straight from ds_read_b128 here; tests/cdna/test_interleave.py checks the ISA for it).
template <dt T>
TILES_DEV void mfma32_agpr(u32x4 a, u32x4 b, f32x16& c) {
#if defined(__gfx950__)
  if constexpr (T == dt::bf16) asm("v_mfma_f32_32x32x16_bf16 %0, %1, %2, %0" : "+a"(c) : "v"(a), "v"(b));
  else asm("v_mfma_f32_32x32x16_f16 %0, %1, %2, %0" : "+a"(c) : "v"(a), "v"(b));
#else
  const u32x2 alo = a.xy, ahi = a.zw, blo = b.xy, bhi = b.zw;  // values 0-3 then 4-7, as mfma32 issues them
  if constexpr (T == dt::bf16)
    asm("v_mfma_f32_32x32x8_bf16 %0, %1, %2, %0\n\tv_mfma_f32_32x32x8_bf16 %0, %3, %4, %0"
        : "+a"(c) : "v"(alo), "v"(blo), "v"(ahi), "v"(bhi));
  else
    asm("v_mfma_f32_32x32x8_f16 %0, %1, %2, %0\n\tv_mfma_f32_32x32x8_f16 %0, %3, %4, %0"
        : "+a"(c) : "v"(alo), "v"(blo), "v"(ahi), "v"(bhi));
#endif
}
template <dt T>
TILES_DEV void mfma16_agpr(u32x4 a, u32x4 b, f32x4& c) {
#if defined(__gfx950__)
  if constexpr (T == dt::bf16) asm("v_mfma_f32_16x16x32_bf16 %0, %1, %2, %0" : "+a"(c) : "v"(a), "v"(b));
  else asm("v_mfma_f32_16x16x32_f16 %0, %1, %2, %0" : "+a"(c) : "v"(a), "v"(b));
#else
  const u32x2 alo = a.xy, ahi = a.zw, blo = b.xy, bhi = b.zw;
  if constexpr (T == dt::bf16)
    asm("v_mfma_f32_16x16x16_bf16 %0, %1, %2, %0\n\tv_mfma_f32_16x16x16_bf16 %0, %3, %4, %0"
        : "+a"(c) : "v"(alo), "v"(blo), "v"(ahi), "v"(bhi));
  else
    asm("v_mfma_f32_16x16x16_f16 %0, %1, %2, %0\n\tv_mfma_f32_16x16x16_f16 %0, %3, %4, %0"
        : "+a"(c) : "v"(alo), "v"(blo), "v"(ahi), "v"(bhi));
#endif
}
// "c is in AGPRs here" (emits nothing)
TILES_DEV void pin_agpr(f32x16& c) { asm volatile("" : "+a"(c)); }
TILES_DEV void pin_agpr(f32x4& c) { asm volatile("" : "+a"(c)); }
// 24 wait states (s_nop N waits N + 1): the MFMA <-> VALU hazards the compiler cannot see (see above)
TILES_DEV void mfma_agpr_fence() { asm volatile("s_nop 7\n\ts_nop 7\n\ts_nop 7" ::: "memory"); }

// ------------------------------------------------------------------ fp8 MFMA (block-scaled fp8 GEMM)
// One fp8 "step": each lane passes 32 bytes of A and of B as two 16-byte chunks (a0 = bytes 0-15, a1 = 16-31),
// 8-bit floats in the arch's own format: gfx942 e4m3fnuz (exponent bias 8), gfx950 OCP e4m3fn (bias 7).
//  gfx942: four v_mfma_f32_32x32x16_fp8_fp8 / v_mfma_f32_16x16x32_fp8_fp8 on bytes 0-7, 8-15, 16-23, 24-31.
//  gfx950: one v_mfma_scale_f32_32x32x64_f8f6f4 / v_mfma_scale_f32_16x16x128_f8f6f4 on all 32 bytes, both
//          operands format 0 (e4m3) and unit block scales (E8M0 127 = 2^0; clang-22 exposes only the scaled
//          builtins, and an all-zero scale would be folded into the unscaled form).
// As for the 16-bit chunks, the k order of the hardware differs from the logical one identically for A and B.
TILES_DEV f32x16 mfma32_fp8(u32x4 a0, u32x4 a1, u32x4 b0, u32x4 b1, f32x16 c) {
#if defined(__gfx950__)
  typedef int i32x8 __attribute__((ext_vector_type(8)));
  const i32x8 a = {(int)a0.x, (int)a0.y, (int)a0.z, (int)a0.w, (int)a1.x, (int)a1.y, (int)a1.z, (int)a1.w};
  const i32x8 b = {(int)b0.x, (int)b0.y, (int)b0.z, (int)b0.w, (int)b1.x, (int)b1.y, (int)b1.z, (int)b1.w};
  return __builtin_amdgcn_mfma_scale_f32_32x32x64_f8f6f4(a, b, c, 0, 0, 0, 127, 0, 127);
#else
  const u32x2 a00 = a0.xy, a01 = a0.zw, a10 = a1.xy, a11 = a1.zw, b00 = b0.xy, b01 = b0.zw, b10 = b1.xy, b11 = b1.zw;
  c = __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(__builtin_bit_cast(long, a00), __builtin_bit_cast(long, b00), c, 0, 0, 0);
  c = __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(__builtin_bit_cast(long, a01), __builtin_bit_cast(long, b01), c, 0, 0, 0);
  c = __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(__builtin_bit_cast(long, a10), __builtin_bit_cast(long, b10), c, 0, 0, 0);
  return __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(__builtin_bit_cast(long, a11), __builtin_bit_cast(long, b11), c, 0, 0, 0);
#endif
}
TILES_DEV f32x4 mfma16_fp8(u32x4 a0, u32x4 a1, u32x4 b0, u32x4 b1, f32x4 c) {
#if defined(__gfx950__)
  typedef int i32x8 __attribute__((ext_vector_type(8)));
  const i32x8 a = {(int)a0.x, (int)a0.y, (int)a0.z, (int)a0.w, (int)a1.x, (int)a1.y, (int)a1.z, (int)a1.w};
  const i32x8 b = {(int)b0.x, (int)b0.y, (int)b0.z, (int)b0.w, (int)b1.x, (int)b1.y, (int)b1.z, (int)b1.w};
  return __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(a, b, c, 0, 0, 0, 127, 0, 127);
#else
  const u32x2 a00 = a0.xy, a01 = a0.zw, a10 = a1.xy, a11 = a1.zw, b00 = b0.xy, b01 = b0.zw, b10 = b1.xy, b11 = b1.zw;
  c = __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(__builtin_bit_cast(long, a00), __builtin_bit_cast(long, b00), c, 0, 0, 0);
  c = __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(__builtin_bit_cast(long, a01), __builtin_bit_cast(long, b01), c, 0, 0, 0);
  c = __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(__builtin_bit_cast(long, a10), __builtin_bit_cast(long, b10), c, 0, 0, 0);
  return __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(__builtin_bit_cast(long, a11), __builtin_bit_cast(long, b11), c, 0, 0, 0);
#endif
}

// "c is computed here" (emits nothing; c stays in VGPRs): orders the MFMAs producing c before the side effects that
// follow in program order (s_waitcnt, LDS writes). Without it the instruction selector may place MFMAs whose
// results are used later below a sched_barrier, behind an s_waitcnt vmcnt(0) meant to come after them.
TILES_DEV void materialize(f32x16& c) { asm volatile("" : "+v"(c)); }
TILES_DEV void materialize(f32x4& c) { asm volatile("" : "+v"(c)); }

// ------------------------------------------------------------------ buffer (global) memory
// A raw buffer resource: 48-bit base, stride 0, num_records = size in bytes, config dword.
// Every access is range-checked against num_records by the hardware: out-of-range loads return 0 and
// out-of-range stores are dropped. So bounds checks cost nothing but a select of the offset (kOob).
typedef __amdgpu_buffer_rsrc_t rsrc_t;
// dword3 for gfx94x/gfx950 (what CK and HipKittens use): DATA_FORMAT=32, no swizzle, no add-tid.
inline constexpr int kRsrcConfig = 0x00020000;
inline constexpr u32 kOob = 0x80000000u;  // an offset past any num_records we build (< 2 GiB)
TILES_DEV rsrc_t make_rsrc(const void* base, u32 bytes) {
  return __builtin_amdgcn_make_buffer_rsrc(const_cast<void*>(base), (short)0, (int)bytes, kRsrcConfig);
}
// voff: per-lane byte offset (VGPR); soff: wave-uniform byte offset (SGPR), added by the hardware.
TILES_DEV u32x4 buffer_load_b128(rsrc_t r, u32 voff, u32 soff = 0) { return __builtin_amdgcn_raw_buffer_load_b128(r, voff, soff, 0); }
TILES_DEV u32x2 buffer_load_b64(rsrc_t r, u32 voff, u32 soff = 0) { return __builtin_amdgcn_raw_buffer_load_b64(r, voff, soff, 0); }
TILES_DEV u32 buffer_load_b32(rsrc_t r, u32 voff, u32 soff = 0) { return __builtin_amdgcn_raw_buffer_load_b32(r, voff, soff, 0); }
TILES_DEV u16 buffer_load_b16(rsrc_t r, u32 voff, u32 soff = 0) { return __builtin_amdgcn_raw_buffer_load_b16(r, voff, soff, 0); }
// A load the code waits for itself (s_waitcnt vmcnt from schedule.waitcnt_for) rather than leaving the
// wait to the compiler: destination first, so an emulator can hold `d` as poison until the covering wait.
TILES_DEV void buffer_load_b128_async(u32x4& d, rsrc_t r, u32 voff, u32 soff = 0) { d = buffer_load_b128(r, voff, soff); }
#if defined(__gfx950__)
// Buffer load straight into LDS, 16 bytes a lane ("buffer_load_dwordx4 ... lds"), no registers involved:
// the 16-byte form is gfx950's (gfx942 loads into LDS at most 4 bytes a lane, which tiles does not use).
// Lane i's 16 bytes land at lds + 16 * i; `lds` must be wave-uniform (it goes through M0). Completion is
// counted by vmcnt like any load; out-of-range lanes read 0 like any buffer load.
TILES_DEV void buffer_load_lds_b128(rsrc_t r, u32 voff, u32 lds, u32 soff = 0) {
  __builtin_amdgcn_raw_ptr_buffer_load_lds(r, (TILES_LDS void*)(unsigned long)lds, 16, voff, soff, 0, 0);
}
#endif
TILES_DEV void buffer_store_b128(u32x4 v, rsrc_t r, u32 voff, u32 soff = 0) { __builtin_amdgcn_raw_buffer_store_b128(v, r, voff, soff, 0); }
TILES_DEV void buffer_store_b64(u32x2 v, rsrc_t r, u32 voff, u32 soff = 0) { __builtin_amdgcn_raw_buffer_store_b64(v, r, voff, soff, 0); }
TILES_DEV void buffer_store_b32(u32 v, rsrc_t r, u32 voff, u32 soff = 0) { __builtin_amdgcn_raw_buffer_store_b32(v, r, voff, soff, 0); }
TILES_DEV void buffer_store_b16(u16 v, rsrc_t r, u32 voff, u32 soff = 0) { __builtin_amdgcn_raw_buffer_store_b16(v, r, voff, soff, 0); }

// ------------------------------------------------------------------ LDS
// LDS is addressed with 32-bit byte offsets (address space 3). Plain loads/stores through such pointers
// become ds_read_b128 / ds_read_b64 / ds_write_b128 / ds_write_b64 / ds_write_b32 when aligned.
TILES_DEV u32 lds_addr(const void* shared_ptr) { return (u32)(unsigned long)(const TILES_LDS void*)shared_ptr; }
TILES_DEV u32x4 lds_read_b128(u32 a) { return *(const TILES_LDS u32x4*)(unsigned long)a; }
TILES_DEV u32x2 lds_read_b64(u32 a) { return *(const TILES_LDS u32x2*)(unsigned long)a; }
TILES_DEV u32 lds_read_b32(u32 a) { return *(const TILES_LDS u32*)(unsigned long)a; }
TILES_DEV void lds_write_b128(u32 a, u32x4 v) { *(TILES_LDS u32x4*)(unsigned long)a = v; }
TILES_DEV void lds_write_b64(u32 a, u32x2 v) { *(TILES_LDS u32x2*)(unsigned long)a = v; }
TILES_DEV void lds_write_b32(u32 a, u32 v) { *(TILES_LDS u32*)(unsigned long)a = v; }

// ------------------------------------------------------------------ waits, barriers, priorities
// Wait until at most N vector-memory (global/buffer) operations of this wave are outstanding.
// Loads return in issue order, so N = number of loads issued after the last one we need.
template <int N> TILES_DEV void wait_vmcnt() {
  static_assert(N >= 0 && N <= kVmMax, "vmcnt out of range");
  __builtin_amdgcn_s_waitcnt(waitcnt_imm(N, 7, kLgkmMax));
}
// Wait until at most N LDS (and scalar-memory) operations are outstanding.
template <int N> TILES_DEV void wait_lgkmcnt() {
  static_assert(N >= 0 && N <= kLgkmMax, "lgkmcnt out of range");
  __builtin_amdgcn_s_waitcnt(waitcnt_imm(kVmMax, 7, N));
}
// Keep the compiler from moving memory operations across this point (emits nothing). s_barrier is
// "IntrNoMem" in LLVM, so without this LDS reads could be hoisted above the barrier that publishes them.
TILES_DEV void compiler_fence() { asm volatile("" ::: "memory"); }
// Workgroup barrier with no implicit memory wait (gfx90a+ have "back-off" barriers): the caller waits on
// exactly the counters it needs first (wait_lgkmcnt<0>() after LDS writes other waves will read).
TILES_DEV void barrier() {
  compiler_fence();
  __builtin_amdgcn_s_barrier();
  compiler_fence();
}
// Scheduling fences for the machine scheduler (emit nothing; visible as comments in -S output).
template <int MASK> TILES_DEV void sched_barrier() { __builtin_amdgcn_sched_barrier(MASK); }
template <int MASK, int COUNT, int GROUP> TILES_DEV void sched_group_barrier() { __builtin_amdgcn_sched_group_barrier(MASK, COUNT, GROUP); }
// Wave priority (0..3): compute clusters raise it so the MFMA burst of one wave group is not starved.
template <int P> TILES_DEV void setprio() { __builtin_amdgcn_s_setprio(P); }

// ------------------------------------------------------------------ cross-lane
// xor-shuffle within a wave. 1, 2: DPP quad_perm (no LDS traffic); 4, 8, 16: ds_swizzle bit-mask mode
// (offset = and 0x1f | or << 5 | xor << 10, within 32 lanes); 32: ds_bpermute (crosses the halves).
template <int MASK> TILES_DEV float shfl_xor(float v) {
  int x = __builtin_bit_cast(int, v);
  if constexpr (MASK == 1) x = __builtin_amdgcn_mov_dpp(x, 0xB1, 0xF, 0xF, false);  // quad_perm [1,0,3,2]
  else if constexpr (MASK == 2) x = __builtin_amdgcn_mov_dpp(x, 0x4E, 0xF, 0xF, false);  // quad_perm [2,3,0,1]
  else if constexpr (MASK == 4 || MASK == 8 || MASK == 16) x = __builtin_amdgcn_ds_swizzle(x, 0x1F | (MASK << 10));
  else if constexpr (MASK == 32) x = __builtin_amdgcn_ds_bpermute((int)((lane_id() ^ 32u) << 2), x);
  else static_assert(MASK == 1, "shfl_xor: mask must be 1, 2, 4, 8, 16 or 32");
  return __builtin_bit_cast(float, x);
}
// value of `v` held by lane `src` (any pattern)
TILES_DEV float shfl(float v, u32 src) {
  return __builtin_bit_cast(float, __builtin_amdgcn_ds_bpermute((int)(src << 2), __builtin_bit_cast(int, v)));
}

// ------------------------------------------------------------------ transcendental (v_exp_f32 etc.)
TILES_DEV float exp2(float x) { return __builtin_amdgcn_exp2f(x); }
TILES_DEV float log2(float x) { return __builtin_amdgcn_logf(x); }
TILES_DEV float rcp(float x) { return __builtin_amdgcn_rcpf(x); }
TILES_DEV float rsqrt(float x) { return __builtin_amdgcn_rsqf(x); }

// ------------------------------------------------------------------ conversions (16-bit bit patterns)
TILES_DEV u16 f32_to_bf16(float f) {
#if defined(__gfx950__)
  return __builtin_bit_cast(u16, (__bf16)f);  // v_cvt_pk_bf16_f32
#else
  u32 u = __builtin_bit_cast(u32, f);  // round to nearest even; quiet NaN stays NaN
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40);
  return (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
}
TILES_DEV u16 f32_to_f16(float f) { return __builtin_bit_cast(u16, (_Float16)f); }
TILES_DEV float bf16_to_f32(u16 h) { return __builtin_bit_cast(float, (u32)h << 16); }
TILES_DEV float f16_to_f32(u16 h) { return (float)__builtin_bit_cast(_Float16, h); }

}  // namespace arch
}  // namespace tiles

#endif  // TILES_ARCH_OVERRIDE
