// tests/compare_util.hpp — comparing a backend's output with the reference:
// random inputs (bf16-rounded ones too) and the relative error every backend
// test checks against.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "layers/format.hpp"

namespace dtrain::test {

using Vec = std::vector<float>;

inline void fill_random(Vec& v, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  for (auto& x : v) x = u(rng);
}

inline Vec random_vec(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  Vec v(n);
  fill_random(v, rng, lo, hi);
  return v;
}

// v with every value rounded to the nearest bfloat16: inputs a bf16 kernel
// casts exactly, given to the f32 reference too.
inline Vec bf16_rounded(Vec v) {
  for (auto& x : v) x = layers::round_bf16(x);
  return v;
}

// max_i |got − ref| / (1 + |ref|); a NaN anywhere makes it NaN, which fails any `<= tol`.
inline double rel_err(const Vec& got, const Vec& ref) {
  REQUIRE(got.size() == ref.size());
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs(double(got[i]) - double(ref[i])) / (1.0 + std::fabs(double(ref[i])));
    if (!(e <= worst)) worst = e;
  }
  return worst;
}

}  // namespace dtrain::test

#define CHECK_CLOSE(got, ref, tol)                         \
  do {                                                     \
    INFO(#got " vs " #ref);                                \
    CHECK(::dtrain::test::rel_err((got), (ref)) <= (tol)); \
  } while (0)
