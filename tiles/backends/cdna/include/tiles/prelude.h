// tiles CDNA device prelude: the few declarations HIP's headers would give us.
// Generated kernels include this first. Two ways to compile the same source:
//  * bare clang (-x hip -nogpuinc -nogpulib, CI without ROCm): we define the HIP keywords here;
//  * hiprtc / hipcc: their runtime header already defines them, so this block is skipped.
#pragma once

#if defined(TILES_EMU_CUDA)
// The CDNA arch layer emulated on an NVIDIA GPU (tiles/backends/cdna_emu): its header was included
// ahead of this one and declared everything below in CUDA terms.
#else

#if defined(TILES_EMU)
// host emulation (tests/cdna/emu): kernels are plain functions run by one fiber per work-item;
// __shared__ arrays are function statics shared by the fibers of the block being run.
#define __global__
#define __device__
#define __host__
#define __shared__ static
#elif !defined(__HIPCC_RTC__) && !defined(__HIP_INCLUDE_HIP_HIP_RUNTIME_H)
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#endif

// Every device helper is a static always-inline function: no calls, no ABI, registers stay visible
// to the allocator (a call would spill the MFMA accumulators).
#define TILES_DEV static __device__ __attribute__((always_inline)) inline
// Pure index math shared with host-side unit tests (grid.h, st.h): host+device, constexpr.
#ifndef TILES_HD
#define TILES_HD static __host__ __device__ __attribute__((always_inline)) constexpr inline
#endif
// Kernel entry with an exact work-group size (the register budget follows from it: 512 threads =
// 2 waves per SIMD = 256 VGPR+AGPR per wave).
#if defined(TILES_EMU)
#define TILES_KERNEL(threads) extern "C"
#else
#define TILES_KERNEL(threads) extern "C" __global__ __attribute__((amdgpu_flat_work_group_size(threads, threads)))
#endif
// Occupancy 1 (one wave per SIMD: the 4-wave interleave gets all 512 registers of a SIMD).
#if defined(TILES_EMU)
#define TILES_ONE_WAVE_PER_SIMD
#else
#define TILES_ONE_WAVE_PER_SIMD __attribute__((amdgpu_waves_per_eu(1, 1)))
#endif
// A kernel's LDS: every template makes exactly one TILES_SHARED (or TILES_NO_SHARED) declaration, first
// thing in the body, so an emulator can put the allocation where its memory model lives.
#define TILES_SHARED(type, name, count) __shared__ __attribute__((aligned(16))) type name[count]
#define TILES_NO_SHARED(type, name) [[maybe_unused]] type* const name = nullptr

typedef unsigned int u32;
typedef unsigned short u16;
typedef short s16x4 __attribute__((ext_vector_type(4)));
typedef unsigned u32x2 __attribute__((ext_vector_type(2)));
typedef unsigned u32x4 __attribute__((ext_vector_type(4)));
typedef int i32x4 __attribute__((ext_vector_type(4)));
typedef float f32x4 __attribute__((ext_vector_type(4)));
typedef float f32x16 __attribute__((ext_vector_type(16)));
typedef _Float16 f16x4 __attribute__((ext_vector_type(4)));
typedef _Float16 f16x8 __attribute__((ext_vector_type(8)));

#endif  // TILES_EMU_CUDA

namespace tiles {
// element types of operand tiles (storage is always 16-bit bit patterns)
enum class dt : int { bf16 = 0, f16 = 1, f32 = 2 };

template <bool C, class A, class B> struct cond { using type = A; };
template <class A, class B> struct cond<false, A, B> { using type = B; };
}  // namespace tiles
