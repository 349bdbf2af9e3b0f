// tiles/backends/hopper/templates/transpose_bytes.cu: out[c][r] = in[r][c] for one or two matrices of bytes.
//
// Hopper's fp8 wgmma reads both operands K-major from shared memory, so an fp8 operand stored the
// other way (the MN-major layouts: A as K x M, B as K x N) is transposed once per call, here, before
// the GEMM (lower_fp8.bind through transpose.py). A generic strided copy moves single bytes and runs at
// a few hundred GB/s; this one moves 16-byte vectors both ways, and takes both operands in one launch
// (blockIdx.z picks the matrix), so the second one's tiles fill the first one's last wave.
//
// One 256-thread block per 128 x 128-byte tile. Thread (ty, tx) of a 32 x 8 grid loads 16 bytes of each
// of the rows 4 ty .. 4 ty + 3 (8 threads read a row's 128 contiguous bytes), transposes each 4 x 4
// bytes in registers with byte permutes, and leaves the 16 words in shared memory in the transposed
// tile's order. After the barrier each thread stores 16 bytes of four output rows, again 128 contiguous
// bytes per 8 threads. Edge tiles take the same path with the bytes past the matrix left out; rows that
// are not 16-byte aligned are read 4 bytes at a time, or 1.

constexpr int TILE = 128;  // bytes on a side of a block's tile

// 16 bytes of row r from column c (zeros past the matrix); `align`: what the base and the row stride are
// multiples of (16, 4 or 1 bytes)
__device__ __forceinline__ uint4 load16(const unsigned char* __restrict__ in, long long ld, int rows, int cols,
                                        int r, int c, int align) {
  uint4 v = make_uint4(0u, 0u, 0u, 0u);
  if (r >= rows) return v;
  const unsigned char* p = in + r * ld + c;
  if (c + 16 <= cols && align == 16) return *reinterpret_cast<const uint4*>(p);
  unsigned w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if (c + 4 * k + 4 <= cols && align >= 4) {
      w[k] = *reinterpret_cast<const unsigned*>(p + 4 * k);
    } else {
      for (int b = 0; b < 4 && c + 4 * k + b < cols; ++b) w[k] |= unsigned(p[4 * k + b]) << (8 * b);
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// the output's base and row stride are multiples of 16 bytes (transpose.py pads its rows)
__device__ __forceinline__ void store16(unsigned char* __restrict__ out, long long ld, int rows, int cols, int r,
                                        int c, uint4 v) {
  if (r >= rows || c >= cols) return;
  unsigned char* p = out + r * ld + c;
  if (c + 16 <= cols) {
    *reinterpret_cast<uint4*>(p) = v;
    return;
  }
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
  for (int b = 0; c + b < cols; ++b) p[b] = (unsigned char)(w[b / 4] >> (8 * (b % 4)));
}

// byte j of each of a, b, c, d, as one word (a's in the lowest byte)
__device__ __forceinline__ unsigned column(unsigned lo01, unsigned lo23, unsigned hi01, unsigned hi23, int j) {
  return j == 0 ? __byte_perm(lo01, lo23, 0x5410) : j == 1 ? __byte_perm(lo01, lo23, 0x7632)
       : j == 2 ? __byte_perm(hi01, hi23, 0x5410) : __byte_perm(hi01, hi23, 0x7632);
}

// Matrix z (0 or 1): in is rows x cols bytes, row stride ld_in, `align` its alignment (16, 4 or 1); out is
// cols x rows bytes, row stride ld_out. The grid covers the larger matrix; the other one's blocks past its
// tiles return at once.
extern "C" __global__ void __launch_bounds__(256)
tiles_transpose_bytes(const unsigned char* __restrict__ in0, long long ld_in0, unsigned char* __restrict__ out0,
                      long long ld_out0, int rows0, int cols0, int align0,
                      const unsigned char* __restrict__ in1, long long ld_in1, unsigned char* __restrict__ out1,
                      long long ld_out1, int rows1, int cols1, int align1) {
  // [output row][output word]; word w of row R sits at w ^ 4 (R / 16), so that the 32 threads of a warp
  // write 32 banks in the first phase and 8 threads read a row's 128 bytes in the second
  __shared__ __align__(16) unsigned t[TILE][TILE / 4];
  const bool second = blockIdx.z == 1;
  const unsigned char* in = second ? in1 : in0;
  unsigned char* out = second ? out1 : out0;
  const long long ld_in = second ? ld_in1 : ld_in0, ld_out = second ? ld_out1 : ld_out0;
  const int rows = second ? rows1 : rows0, cols = second ? cols1 : cols0, align = second ? align1 : align0;
  const int r0 = blockIdx.y * TILE, c0 = blockIdx.x * TILE;
  if (r0 >= rows || c0 >= cols) return;
  const int tx = threadIdx.x % 8, ty = threadIdx.x / 8;
  uint4 v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] = load16(in, ld_in, rows, cols, r0 + 4 * ty + i, c0 + 16 * tx, align);
  const unsigned a[4] = {v[0].x, v[0].y, v[0].z, v[0].w}, b[4] = {v[1].x, v[1].y, v[1].z, v[1].w};
  const unsigned c[4] = {v[2].x, v[2].y, v[2].z, v[2].w}, d[4] = {v[3].x, v[3].y, v[3].z, v[3].w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {  // columns 16 tx + 4 k .. + 3: output rows, each a word of rows 4 ty .. 4 ty + 3
    const unsigned lo01 = __byte_perm(a[k], b[k], 0x5140), lo23 = __byte_perm(c[k], d[k], 0x5140);
    const unsigned hi01 = __byte_perm(a[k], b[k], 0x7362), hi23 = __byte_perm(c[k], d[k], 0x7362);
#pragma unroll
    for (int j = 0; j < 4; ++j) t[16 * tx + 4 * k + j][ty ^ (tx << 2)] = column(lo01, lo23, hi01, hi23, j);
  }
  __syncthreads();
  const int q = threadIdx.x % 8;  // the 16-byte chunk of an output row this thread stores
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int R = threadIdx.x / 8 + 32 * i;
    const uint4 w = *reinterpret_cast<const uint4*>(&t[R][4 * (q ^ (R / 16))]);
    store16(out, ld_out, cols, rows, c0 + R, r0 + 16 * q, w);
  }
}
