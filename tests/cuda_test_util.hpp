// tests/cuda_test_util.hpp — helpers of the [cuda] tests: the CUDA backend next
// to the reference backend, host ↔ device copies, random data, the error measure.
//
// Tolerance (stated once, used by every [cuda] case): max_i |gpu_i − ref_i| /
// (1 + |ref_i|) ≤ kTol = 1e-4 for cuDNN / cuBLAS / reduction kernels in FP32
// (TF32 off: CUDNN_FMA_MATH, cuBLAS default math; float sums in another order
// than the reference's double sums, inputs U(−1, 1)); ≤ 1e-6 for the
// elementwise kernels (softmax, SGD); bit for bit for ReLU, add, accumulate,
// fill, copy, transfers and dropout masks.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "layers/cpu/reference.hpp"
#include "layers/cuda/cuda_backend.hpp"

namespace dtrain::layers::test {

constexpr double kTol = 1e-4;
constexpr double kTolElementwise = 1e-6;
using Vec = std::vector<float>;

inline Vec random_vec(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  Vec v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

inline double rel_err(const Vec& got, const Vec& ref) {
  REQUIRE(got.size() == ref.size());
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs(double(got[i]) - double(ref[i])) / (1.0 + std::fabs(double(ref[i])));
    if (!(e <= worst)) worst = e;  // NaN fails
  }
  return worst;
}

#define CHECK_CLOSE(got, ref, tol)         \
  do {                                     \
    INFO(#got " vs " #ref);                \
    CHECK(rel_err((got), (ref)) <= (tol)); \
  } while (0)

inline CudaOptions quiet_options() {
  CudaOptions o;
  o.log_algorithms = false;
  return o;
}

// The CUDA backend and the reference, with device buffers kept alive here.
struct Both {
  std::unique_ptr<Backend> gpu, ref;
  std::vector<std::shared_ptr<float>> keep;
  explicit Both(const CudaOptions& o = quiet_options())
      : gpu(make_cuda_backend(o)), ref(make_reference_backend()) {}
  float* zeros(size_t n) {
    keep.push_back(gpu->allocate(n));
    return keep.back().get();
  }
  float* up(const Vec& v) {
    float* p = zeros(v.size());
    gpu->upload(v.data(), p, v.size() * sizeof(float));
    return p;
  }
  void put(float* dev, const Vec& v) { gpu->upload(v.data(), dev, v.size() * sizeof(float)); }
  Vec down(const float* p, size_t n) {
    Vec v(n);
    gpu->download(p, v.data(), n * sizeof(float));
    return v;
  }
};

}  // namespace dtrain::layers::test
