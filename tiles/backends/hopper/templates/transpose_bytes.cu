// tiles/backends/hopper/templates/transpose_bytes.cu: out[c][r] = in[r][c] for a matrix of bytes.
//
// Hopper's fp8 wgmma reads both operands K-major from shared memory, so an fp8 operand stored the
// other way (the MN-major layouts: A as K x M, B as K x N) is transposed once per call, here, before
// the GEMM (lower_fp8.bind through transpose.py). A generic strided copy moves single bytes and runs at
// a few hundred GB/s; this one moves 4-byte words both ways.
//
// One 256-thread block per 64 x 64-byte tile. Thread (ty, tx) of a 16 x 16 grid loads the 4 x 4 bytes
// at rows 4 ty .. 4 ty + 3, columns 4 tx .. 4 tx + 3 (one word a row: 16 threads read 64 contiguous
// bytes), transposes them in registers with byte permutes, and leaves the 4 words in shared memory
// in the transposed tile's order; after the barrier each thread writes 4 words of output rows, again
// 64 contiguous bytes per 16 threads. Edge tiles and unaligned rows take the same path byte by byte.

constexpr int TILE = 64;  // bytes on a side of a block's tile

__device__ __forceinline__ unsigned load_word(const unsigned char* __restrict__ in, long long ld, int rows, int cols,
                                              int r, int c, bool words) {
  if (r >= rows) return 0u;
  const unsigned char* p = in + r * ld + c;
  if (words && c + 4 <= cols) return *reinterpret_cast<const unsigned*>(p);
  unsigned w = 0;
  for (int b = 0; b < 4 && c + b < cols; ++b) w |= unsigned(p[b]) << (8 * b);
  return w;
}

__device__ __forceinline__ void store_word(unsigned char* __restrict__ out, long long ld, int rows, int cols, int r,
                                           int c, unsigned w, bool words) {
  if (r >= rows) return;
  unsigned char* p = out + r * ld + c;
  if (words && c + 4 <= cols) {
    *reinterpret_cast<unsigned*>(p) = w;
    return;
  }
  for (int b = 0; b < 4 && c + b < cols; ++b) p[b] = (unsigned char)(w >> (8 * b));
}

// in: rows x cols bytes, row stride ld_in; out: cols x rows bytes, row stride ld_out. `words`: both
// base pointers and both row strides are multiples of 4 bytes.
extern "C" __global__ void __launch_bounds__(256)
tiles_transpose_bytes(const unsigned char* __restrict__ in, long long ld_in, unsigned char* __restrict__ out,
                      long long ld_out, int rows, int cols, int words) {
  __shared__ unsigned t[TILE][TILE / 4 + 1];  // [output row][output word], padded against bank conflicts
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int r0 = blockIdx.y * TILE, c0 = blockIdx.x * TILE;
  unsigned w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = load_word(in, ld_in, rows, cols, r0 + 4 * ty + i, c0 + 4 * tx, words);
  // 4 x 4 bytes transposed: v[j] holds byte j of w[0], w[1], w[2], w[3] (column 4 tx + j, rows 4 ty ..)
  const unsigned lo01 = __byte_perm(w[0], w[1], 0x5140), lo23 = __byte_perm(w[2], w[3], 0x5140);
  const unsigned hi01 = __byte_perm(w[0], w[1], 0x7362), hi23 = __byte_perm(w[2], w[3], 0x7362);
  t[4 * tx + 0][ty] = __byte_perm(lo01, lo23, 0x5410);
  t[4 * tx + 1][ty] = __byte_perm(lo01, lo23, 0x7632);
  t[4 * tx + 2][ty] = __byte_perm(hi01, hi23, 0x5410);
  t[4 * tx + 3][ty] = __byte_perm(hi01, hi23, 0x7632);
  __syncthreads();
#pragma unroll
  for (int i = 0; i < 4; ++i)
    store_word(out, ld_out, cols, rows, c0 + 4 * ty + i, r0 + 4 * tx, t[4 * ty + i][tx], words);
}
