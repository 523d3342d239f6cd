// bench/dot_throughput.c — the core's peak for fp32 FMAs and for AVX512-BF16
// dot products, from instruction throughput alone (no memory): 12 independent
// zmm accumulators, so each instruction's latency is hidden, timed over 2·10^8
// instructions on one core.
//
//   vfmadd231ps zmm  16 fp32 multiply-adds  = 32 FLOP per instruction
//   vdpbf16ps   zmm  32 bf16 products, summed in pairs into 16 fp32 = 64 FLOP
//
// bf16 can only train faster than fp32 where the second figure is above the
// first (or where AMX does the products, which this does not measure):
// docs/cpu-performance.md §4. Build and run (GCC or Clang, x86-64):
//   cc -O2 -mavx512f -mavx512bf16 bench/dot_throughput.c -o /tmp/dot_throughput && /tmp/dot_throughput
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define ROUNDS 16666667L  // × 12 instructions
#define FMA(a) __asm__ volatile("vfmadd231ps %1, %2, %0" : "+v"(a) : "v"(x), "v"(y))
#define DP(a) __asm__ volatile("vdpbf16ps %1, %2, %0" : "+v"(a) : "v"(bx), "v"(by))
#define TWELVE(OP) OP(a0); OP(a1); OP(a2); OP(a3); OP(a4); OP(a5); OP(a6); OP(a7); OP(a8); OP(a9); OP(a10); OP(a11)

int main(void) {
  if (!__builtin_cpu_supports("avx512f")) {
    printf("dot_throughput: this CPU has no AVX-512F\n");
    return 1;
  }
  const int has_bf16 = __builtin_cpu_supports("avx512bf16");
  const __m512 x = _mm512_set1_ps(1.0f), y = _mm512_set1_ps(1e-9f);
  const __m512i bx = _mm512_set1_epi16(0x3f80), by = _mm512_set1_epi16(0x3000);  // bf16 1.0, ~4.7e-10
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0,
         a10 = a0, a11 = a0;
  const double n = 12.0 * ROUNDS;
  double best_f = 1e30, best_b = 1e30;
  for (int rep = 0; rep < 3; ++rep) {  // the best of three
    double t = now_s();
    for (long i = 0; i < ROUNDS; ++i) { TWELVE(FMA); }
    t = now_s() - t;
    if (t < best_f) best_f = t;
    if (has_bf16) {
      t = now_s();
      for (long i = 0; i < ROUNDS; ++i) { TWELVE(DP); }
      t = now_s() - t;
      if (t < best_b) best_b = t;
    }
  }
  float sink[16];
  _mm512_storeu_ps(sink, _mm512_add_ps(_mm512_add_ps(a0, a5), a11));
  const double f32 = 32.0 * n / best_f / 1e9;
  printf("vfmadd231ps zmm: %.3f ns per instruction, %.1f GFLOP/s per core (fp32)\n", 1e9 * best_f / n, f32);
  if (!has_bf16) {
    printf("vdpbf16ps   zmm: not on this CPU (no AVX512-BF16)\n");
  } else {
    const double b16 = 64.0 * n / best_b / 1e9;
    printf("vdpbf16ps   zmm: %.3f ns per instruction, %.1f GFLOP/s per core (bf16)\n", 1e9 * best_b / n, b16);
    printf("bf16 / fp32 peak: %.2f%s\n", b16 / f32,
           b16 < f32 ? " (bf16 dot products are slower than fp32 FMAs here: without AMX, bf16 cannot train faster)" : "");
  }
  return sink[0] == 12345.0f;  // keeps the accumulators live
}
