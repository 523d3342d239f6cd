// core/sum_squares.cpp — see sum_squares.hpp.
#include "core/sum_squares.hpp"

#include <cstdint>

// The fixed order is the point: reassociation would change the bits.
#ifdef __FAST_MATH__
#error "core/sum_squares.cpp must not be compiled with -ffast-math (its fixed order of addition would be reassociated)"
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DT_SUMSQ_X86 1
#endif

namespace dtrain {
namespace {

// Element e into `lane` (after adding other's element to g[e] when Add).
template <bool Add>
inline void add_square(double& lane, float* __restrict g, const float* __restrict x, size_t e) {
  float v = x[e];
  if constexpr (Add) g[e] = v = g[e] + v;
  lane += static_cast<double>(v) * v;
}

// The ragged end [e, n) (e a multiple of the lanes) into lanes 0, 1, …, then
// the lanes added in order: shared by both loops.
template <bool Add>
double finish(double (&lane)[kSumSquaresLanes], float* __restrict g, const float* __restrict x, size_t e, size_t n) {
  for (size_t l = 0; e < n; ++e, ++l) add_square<Add>(lane[l], g, x, e);
  double q = 0;
  for (double v : lane) q += v;
  return q;
}

// The definition (sum_squares.hpp): element e to lane e mod kSumSquaresLanes,
// each lane in double, the lanes added in order.
template <bool Add>
double lanes_portable(float* __restrict g, const float* __restrict x, size_t n) {
  double lane[kSumSquaresLanes] = {};
  size_t e = 0;
  for (; e + kSumSquaresLanes <= n; e += kSumSquaresLanes)
    for (size_t l = 0; l < kSumSquaresLanes; ++l) add_square<Add>(lane[l], g, x, e + l);
  return finish<Add>(lane, g, x, e, n);
}

#ifdef DT_SUMSQ_X86
// How far ahead lanes_avx2 prefetches: 4 KiB.
constexpr uintptr_t kPrefetchBytes = 4096;

// The address `bytes` past p, as an integer: a prefetch hint never faults,
// past the end of the array included, but a pointer formed there would be
// undefined behaviour.
inline const char* ahead(const float* p, uintptr_t bytes) {
  return reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) + bytes);
}

// The same lanes in 8 ymm registers of 4 doubles (register k: lanes 4k …
// 4k + 3): 8 independent add chains, enough to hide the add latency (the
// compiler's vectorisation of the loop above keeps fewer). A fused
// multiply-add gives the bits of a multiply then an add: the product is
// exact in double.
template <bool Add>
__attribute__((target("avx2,fma"))) double lanes_avx2(float* __restrict g, const float* __restrict x, size_t n) {
  static_assert(kSumSquaresLanes == 32, "8 registers of 4 double lanes");
  __m256d acc[8];
  for (auto& a : acc) a = _mm256_setzero_pd();
  size_t e = 0;
  for (; e + kSumSquaresLanes <= n; e += kSumSquaresLanes) {
    // 4 KiB ahead, both cache lines of these 32 floats. A thread streaming
    // from memory alone is bound by its outstanding misses, which the
    // hardware prefetcher alone keeps too few of: 61 M floats from DRAM on
    // 2 threads of an Emerald Rapids Xeon, 14.6–17.3 → 11.1–11.6 ms.
    _mm_prefetch(ahead(x + e, kPrefetchBytes), _MM_HINT_T0);
    _mm_prefetch(ahead(x + e, kPrefetchBytes + 64), _MM_HINT_T0);
    if constexpr (Add) {
      _mm_prefetch(ahead(g + e, kPrefetchBytes), _MM_HINT_T0);
      _mm_prefetch(ahead(g + e, kPrefetchBytes + 64), _MM_HINT_T0);
    }
    for (int h = 0; h < 4; ++h) {  // 8 floats: lanes 8h … 8h + 7
      __m256 v = _mm256_loadu_ps(x + e + 8 * h);
      if constexpr (Add) {
        v = _mm256_add_ps(_mm256_loadu_ps(g + e + 8 * h), v);
        _mm256_storeu_ps(g + e + 8 * h, v);
      }
      const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
      const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
      acc[2 * h] = _mm256_fmadd_pd(lo, lo, acc[2 * h]);
      acc[2 * h + 1] = _mm256_fmadd_pd(hi, hi, acc[2 * h + 1]);
    }
  }
  double lane[kSumSquaresLanes];
  for (int k = 0; k < 8; ++k) _mm256_storeu_pd(lane + 4 * k, acc[k]);
  return finish<Add>(lane, g, x, e, n);
}

bool use_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
#endif

}  // namespace

double sum_squares(const float* x, size_t n) {
#ifdef DT_SUMSQ_X86
  if (use_avx2()) return lanes_avx2<false>(nullptr, x, n);
#endif
  return lanes_portable<false>(nullptr, x, n);
}

double add_and_sum_squares(float* g, const float* other, size_t n) {
#ifdef DT_SUMSQ_X86
  if (use_avx2()) return lanes_avx2<true>(g, other, n);
#endif
  return lanes_portable<true>(g, other, n);
}

namespace detail {
double sum_squares_portable(const float* x, size_t n) { return lanes_portable<false>(nullptr, x, n); }
double add_and_sum_squares_portable(float* g, const float* other, size_t n) {
  return lanes_portable<true>(g, other, n);
}
}  // namespace detail

}  // namespace dtrain
