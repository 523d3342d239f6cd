// tests/cuda_test_util.hpp — helpers of the [cuda] tests: the CUDA backend next
// to the reference backend, host ↔ device copies, random data, the error measure.
//
// Tolerances: those of the backend table (tests/backend_ops.hpp), which
// compares every CUDA kernel with the reference; kTol is its Tol::kernel.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "compare_util.hpp"
#include "layers/cpu/reference.hpp"
#include "layers/cuda/cuda_backend.hpp"

namespace dtrain::layers::test {

constexpr double kTol = 1e-4;
using ::dtrain::test::random_vec;
using ::dtrain::test::rel_err;
using ::dtrain::test::Vec;

// Parts of a case that cannot run on this machine or at this world size: counted
// here, reported by tests/cuda_main.cpp at the end as "SKIPPED-PART: N".
inline int& skipped_parts() {
  static int n = 0;
  return n;
}

}  // namespace dtrain::layers::test

// Declares a skipped part loudly: a WARN naming it, the count above, and one
// (passing) assertion, so that Catch2's NoAssertions check does not fail a case
// whose only part was skipped on purpose.
#define DT_CUDA_SKIPPED_PART(why)                              \
  do {                                                        \
    WARN("SKIPPED-PART: " << why);                            \
    ++::dtrain::layers::test::skipped_parts();                \
    SUCCEED("skipped on purpose (see the warning)");          \
  } while (0)

namespace dtrain::layers::test {

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
