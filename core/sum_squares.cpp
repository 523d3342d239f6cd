// core/sum_squares.cpp — see sum_squares.hpp.
#include "core/sum_squares.hpp"

namespace dtrain {
namespace {

template <bool Add>
[[gnu::always_inline]] inline double lanes(float* __restrict g, const float* __restrict x, size_t n) {
  constexpr size_t kLanes = 8;
  double lane[kLanes] = {};
  auto at = [&](size_t e, size_t l) {
    float v = x[e];
    if constexpr (Add) g[e] = v = g[e] + v;
    lane[l] += static_cast<double>(v) * v;
  };
  size_t e = 0;
  for (; e + kLanes <= n; e += kLanes)
    for (size_t l = 0; l < kLanes; ++l) at(e + l, l);
  for (size_t l = 0; e < n; ++e, ++l) at(e, l);
  double q = 0;
  for (double v : lane) q += v;
  return q;
}

}  // namespace

#if defined(__x86_64__) && defined(__GNUC__)
#define DT_SUMSQ_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DT_SUMSQ_CLONES
#endif

DT_SUMSQ_CLONES double sum_squares(const float* x, size_t n) { return lanes<false>(nullptr, x, n); }
DT_SUMSQ_CLONES double add_and_sum_squares(float* g, const float* other, size_t n) {
  return lanes<true>(g, other, n);
}

}  // namespace dtrain
