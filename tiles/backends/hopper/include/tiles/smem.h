// tiles/smem.h — shared-memory tiles in the layouts TMA writes and wgmma reads.
//
// st<T, R, C, SW>: an R x C tile of T, row-major in the logical sense, stored as C / (SW / sizeof(T))
// column CHUNKS. Chunk j holds columns [j*CW, (j+1)*CW) of every row, one SW-byte line per row, rows
// consecutive. Inside a chunk the 16-byte pieces of row r are permuted by XOR with (r mod SW/16): the
// "SW-byte swizzle" that TMA (CU_TENSOR_MAP_SWIZZLE_{32,64,128}B) applies on address bits, so a chunk
// is exactly one TMA box of CW x R elements. The tile must start 1024-byte aligned (the swizzle
// pattern repeats every 8 rows x 128 bytes and is computed from the absolute address).
//
// The same bytes are a wgmma operand in two ways (descriptor fields per the PTX ISA "matrix descriptor"):
//   K-major  (rows = M or N, columns = K; e.g. A of A@B, or B given as N x K):
//             LBO unused for swizzled layouts, SBO = 8 rows * SW bytes; the k-th 16-column step starts
//             (k % (SW/32)) * 32 bytes into the line, in chunk k / (SW/32).
//   MN-major (rows = K, columns = M or N; e.g. B of A@B with B row-major K x N → wgmma "transpose"):
//             LBO = distance between column chunks (R * SW bytes), SBO = 8 rows * SW bytes; the k-th
//             16-row step starts 16 * SW bytes further.
#pragma once
#include "arch.h"

namespace tiles {

template <int SW> struct swizzle_mode {
  static_assert(SW == 32 || SW == 64 || SW == 128, "swizzle is 32, 64 or 128 bytes");
  // wgmma descriptor bits 62-63: 1 = 128B, 2 = 64B, 3 = 32B.
  static constexpr u64 desc_bits = (SW == 128 ? 1ull : SW == 64 ? 2ull : 3ull) << 62;
  // number of row bits that XOR into the 16-byte piece index
  static constexpr u32 mask = SW / 16 - 1;
};

// Byte offset, within a 1024-aligned region, of linear byte offset `lin` after the SW-byte swizzle:
// bits [4, 4+log2(SW/16)) ^= bits [7, 7+log2(SW/16)).
template <int SW> __host__ __device__ constexpr u32 swizzle(u32 lin) {
  return lin ^ (((lin >> 7) & swizzle_mode<SW>::mask) << 4);
}

template <typename T, int R, int C, int SW = 128> struct alignas(1024) st {
  using dtype = T;
  static constexpr int rows = R, cols = C, swizzle_bytes = SW;
  static constexpr int chunk_cols = SW / int(sizeof(T));  // columns per chunk = the TMA box width
  static constexpr int chunks = C / chunk_cols;
  static constexpr int chunk_bytes = R * SW;
  static constexpr int bytes = R * C * int(sizeof(T));
  static_assert(C % chunk_cols == 0, "shared tile columns must be a multiple of the swizzle width");
  static_assert(R % 8 == 0, "shared tile rows must be a multiple of 8 (one swizzle period)");
  static_assert(bytes % 1024 == 0, "shared tile size must keep the next tile 1024-byte aligned");

  T data[R * C];

  // Byte offset of element (r, c) from the start of the tile.
  static __host__ __device__ constexpr u32 offset(int r, int c) {
    return u32(c / chunk_cols) * chunk_bytes + swizzle<SW>(u32(r) * SW + u32(c % chunk_cols) * sizeof(T));
  }
  __device__ T& at(int r, int c) { return *reinterpret_cast<T*>(reinterpret_cast<char*>(data) + offset(r, c)); }
  __device__ const T& at(int r, int c) const {
    return *reinterpret_cast<const T*>(reinterpret_cast<const char*>(data) + offset(r, c));
  }
  __device__ u32 addr() const { return arch::smem_addr(data); }
};

// Tile i of N R x C tiles carved out of a larger shared tile whose bytes are free: its last reader has
// retired, and its ring stage is not handed back until the carved tiles' own readers are done. A TMA
// staging area that costs no shared memory of its own (the forward's O, in the last key block's K).
// Every carved tile starts 1024-byte aligned, as the swizzle needs.
template <typename T, int R, int C, int N, typename Big>
__device__ __forceinline__ st<T, R, C>& carve(Big& big, int i) {
  static_assert(N * st<T, R, C>::bytes <= int(sizeof(Big)), "the carved tiles do not fit in the shared tile");
  return *reinterpret_cast<st<T, R, C>*>(reinterpret_cast<unsigned char*>(&big) + i * st<T, R, C>::bytes);
}

// Rows [first, R) of a shared tile set to zero by the `threads` threads calling it (16 bytes a store):
// a TMA box that ran past the rows its view keeps (X[:n], a sequence's keys in a cache allocated for
// the longest) then reads as a box past the tensor's end does. The swizzle permutes 16-byte pieces
// within a row's SW-byte line, so a row is whole lines: rows [first, R) of each chunk are one span.
// Follow with arch::fence_proxy_async() and a barrier of the threads before a wgmma reads the tile.
template <typename T, int R, int C, int SW>
__device__ __forceinline__ void zero_rows(st<T, R, C, SW>& t, int first, int thread, int threads) {
  first = first < 0 ? 0 : first;
  if (first >= R) return;
  const int pieces = (R - first) * (SW / 16);  // 16-byte pieces of one chunk past `first`
  unsigned char* base = reinterpret_cast<unsigned char*>(t.data) + first * SW;
  for (int i = thread; i < pieces * st<T, R, C, SW>::chunks; i += threads)
    *reinterpret_cast<uint4*>(base + (i / pieces) * st<T, R, C, SW>::chunk_bytes + (i % pieces) * 16) = make_uint4(0, 0, 0, 0);
}

// sv<C>: a window of C floats in shared memory, one TMA box of a vector (the backward's LSE and Delta
// of a query block), loaded into a ring stage beside the stage's tiles. 128-byte aligned: TMA's
// destination alignment for an unswizzled box.
template <int C> struct alignas(128) sv {
  static constexpr int cols = C, bytes = C * 4;
  static_assert(bytes % 16 == 0, "a TMA box's inner extent is a multiple of 16 bytes");
  float data[C];
  __device__ u32 addr() const { return arch::smem_addr(data); }
};

// The 14-bit descriptor fields hold byte quantities >> 4.
__device__ __forceinline__ u64 desc_field(u32 bytes) { return u64((bytes & 0x3FFFF) >> 4); }

// The descriptor `bytes` further on in the same tile: the start address field (bits 0-13, in 16-byte
// units) is the only one that changes, and shared memory addresses stay below 2^18, so the field never
// carries into the next. One add per wgmma where building the descriptor is a few shifts, masks and ors.
__device__ __forceinline__ u64 desc_advance(u64 desc, u32 bytes) { return desc + (bytes >> 4); }

// Descriptor of the K-major 64 x 16 (or 64 x N) operand that starts at row `row0`, k-step `k16`.
// One k-step is 32 bytes of a row: 16 columns of a 16-bit type (k16 wgmma), 32 of an 8-bit one (k32).
// Built as the k-step 0 descriptor plus the step's offset (a constant in an unrolled loop), so the
// k-steps of one operand share one descriptor build.
template <typename ST> __device__ __forceinline__ u64 desc_kmajor(const ST& t, int row0, int k16) {
  constexpr int steps_per_chunk = ST::swizzle_bytes / 32;
  static_assert(sizeof(typename ST::dtype) == 2 || sizeof(typename ST::dtype) == 1,
                "wgmma operands here are 16-bit or 8-bit");
  const u32 a = t.addr() + u32(row0) * ST::swizzle_bytes;
  const u64 d = desc_field(a) | (desc_field(16) << 16) | (desc_field(8 * ST::swizzle_bytes) << 32) |
                swizzle_mode<ST::swizzle_bytes>::desc_bits;
  return desc_advance(d, u32(k16 / steps_per_chunk) * ST::chunk_bytes + u32(k16 % steps_per_chunk) * 32);
}

// Descriptor of the MN-major operand (rows are K) at k-step `k16`, starting at column chunk `chunk0`.
template <typename ST> __device__ __forceinline__ u64 desc_mnmajor(const ST& t, int k16, int chunk0 = 0) {
  static_assert(sizeof(typename ST::dtype) == 2, "wgmma operands here are 16-bit");
  const u32 a = t.addr() + u32(chunk0) * ST::chunk_bytes;
  const u64 d = desc_field(a) | (desc_field(ST::chunk_bytes) << 16) | (desc_field(8 * ST::swizzle_bytes) << 32) |
                swizzle_mode<ST::swizzle_bytes>::desc_bits;
  return desc_advance(d, u32(k16) * 16 * ST::swizzle_bytes);
}

// Bump allocator over the dynamic shared memory window; every tile lands 1024-byte aligned.
struct smem_allocator {
  char* p;
  // Align on the shared-window address (what the swizzle and TMA see), not the generic pointer.
  __device__ explicit smem_allocator(void* base)
      : p(reinterpret_cast<char*>(base) + ((1024 - (arch::smem_addr(base) & 1023)) & 1023)) {}
  template <typename X> __device__ X& take(int n = 1) {
    X* x = reinterpret_cast<X*>(p);
    p += ((sizeof(X) * n + 1023) / 1024) * 1024;
    return *x;
  }
};

}  // namespace tiles
