// Host driver for the emulated GEMM: random A (M x K), B (K x N) in bf16/f16, runs every work-group of the
// rendered kernel (included as KERNEL_SRC, name KERNEL_NAME) through the fiber emulator, compares C with
// a float64 reference on the same rounded inputs. Prints "maxerr <e> ref_scale <s> bad_pad <n> barriers <n>"
// (bad_pad: bytes of C's padding columns that were written; barriers: s_barrier executions, all work-items).
// argv: M N K lda ldb ldc grid
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include KERNEL_SRC

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float urand() { rng = rng * 6364136223846793005ull + 1442695040888963407ull; return ((rng >> 40) / 16777216.0f) * 2.0f - 1.0f; }
static uint16_t to16(float f) { return EMU_IN_BF16 ? tiles::arch::f32_to_bf16(f) : tiles::arch::f32_to_f16(f); }
static float from16(uint16_t h) { return EMU_IN_BF16 ? tiles::arch::bf16_to_f32(h) : tiles::arch::f16_to_f32(h); }

static int M, N, K, lda, ldb, ldc;
static std::vector<uint16_t> A, B;
static std::vector<unsigned char> C;
#if defined(EMU_IR_ARGS)  // the IR lowering's signature: pointers, then every dim and stride
static void body() { KERNEL_NAME(A.data(), B.data(), C.data(), M, K, lda, 1, K, N, ldb, 1, M, N, ldc, 1); }
#else
static void body() { KERNEL_NAME(A.data(), B.data(), C.data(), M, N, K, lda, ldb, ldc); }
#endif

int main(int argc, char** argv) {
  M = atoi(argv[1]); N = atoi(argv[2]); K = atoi(argv[3]); lda = atoi(argv[4]); ldb = atoi(argv[5]); ldc = atoi(argv[6]);
  const int grid = atoi(argv[7]);
  A.assign((size_t)M * lda, 0); B.assign((size_t)K * ldb, 0);
  for (auto& x : A) x = to16(urand());
  for (auto& x : B) x = to16(urand());
  C.assign((size_t)M * ldc * EMU_OUT_BYTES, 0xFF);  // poisoned: NaN patterns where never written
  long long barriers = 0;
  for (int b = 0; b < grid; ++b) barriers += tiles::emu::run_block((unsigned)b, 512, body);
  double maxerr = 0, scale = 0;
  long long bad_pad = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < ldc; ++j) {
      const unsigned char* p = &C[((size_t)i * ldc + j) * EMU_OUT_BYTES];
      if (j >= N) {  // padding columns must stay untouched
        for (int q = 0; q < EMU_OUT_BYTES; ++q) bad_pad += p[q] != 0xFF;
        continue;
      }
      double ref = 0;
      for (int k = 0; k < K; ++k) ref += (double)from16(A[(size_t)i * lda + k]) * from16(B[(size_t)k * ldb + j]);
      double got;
      if (EMU_OUT_BYTES == 4) { float f; memcpy(&f, p, 4); got = f; }
      else { uint16_t h; memcpy(&h, p, 2); got = EMU_OUT_BF16 ? tiles::arch::bf16_to_f32(h) : tiles::arch::f16_to_f32(h); }
      double e = std::isnan(got) ? INFINITY : std::fabs(got - ref);
      if (e > maxerr) maxerr = e;
      if (std::fabs(ref) > scale) scale = std::fabs(ref);
    }
  printf("maxerr %.6g ref_scale %.6g bad_pad %lld barriers %lld\n", maxerr, scale, bad_pad, barriers);
  return 0;
}
