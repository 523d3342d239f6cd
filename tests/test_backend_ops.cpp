// tests/test_backend_ops.cpp — every backend the build has against the
// reference, over the one table of operations (tests/backend_ops.hpp: the ops,
// the tolerances). The reference itself is checked by finite differences
// (test_reference_grad.cpp, test_reference_norm_grad.cpp).
//
// The CUDA case needs a GPU. Without one (or without the CUDA backend built)
// it runs nothing and says so in a line starting "DTRAIN_TEST_SKIPPED", which
// ctest's SKIP_REGULAR_EXPRESSION (tests/CMakeLists.txt) reports as skipped,
// never as passed.
#include <catch2/catch.hpp>

#include "backend_ops.hpp"
#include "layers/cpu/reference.hpp"
#include "layers/cpu/staged.hpp"
#ifdef DTRAIN_HAVE_CUDA
#include "layers/cuda/cuda_backend.hpp"
#endif

namespace dtrain::test::ops {
namespace {

using namespace dtrain::layers;

void run(const BackendUnderTest& b) {
  const int ran = check_all_ops(b);
  CHECK(ran == int(all_ops().size()));
}

}  // namespace

TEST_CASE("backend ops: cpu (oneDNN + BLAS) against the reference", "[backend_ops]") {
  run({"cpu", [] { return make_backend("cpu"); }, false});
}

TEST_CASE("backend ops: cpu-staged (wrapping cpu) against the reference", "[backend_ops][staged]") {
  run({"cpu-staged", [] { return make_backend("cpu-staged"); }, false});
}

TEST_CASE("backend ops: cpu-staged wrapping the reference is bitwise the reference", "[backend_ops][staged]") {
  run({"cpu-staged(reference)", [] { return make_staged_backend(make_reference_backend()); }, true});
}

TEST_CASE("backend ops: cuda against the reference", "[backend_ops][cuda]") {
#ifdef DTRAIN_HAVE_CUDA
  if (cuda_device_count() == 0) {
    WARN("DTRAIN_TEST_SKIPPED: backend cuda: no CUDA device; " << all_ops().size() << " ops not run");
    return;
  }
  run({"cuda", [] {
         CudaOptions o;
         o.log_algorithms = false;
         return make_cuda_backend(o);
       },
       false});
#else
  WARN("DTRAIN_TEST_SKIPPED: backend cuda: not built (DTRAIN_CUDA=OFF or no toolkit); " << all_ops().size()
                                                                                        << " ops not run");
#endif
}

}  // namespace dtrain::test::ops
