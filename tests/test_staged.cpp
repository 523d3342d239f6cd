// tests/test_staged.cpp — the cpu-staged backend (the device path's test
// double) and the device options of `dtrain train`.
//
// cpu-staged must (1) compute exactly what the wrapped backend computes (the
// table of tests/backend_ops.cpp checks it), (2) refuse host pointers where the device is expected and device pointers where
// host memory is expected, as a GPU would fault, and (3) hand out NaN-filled
// host staging memory, so that a missing download shows up as NaN.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "engine/config.hpp"
#include "layers/cpu/reference.hpp"
#include "layers/cpu/staged.hpp"
#include "layers/models.hpp"

using namespace dtrain;
using namespace dtrain::layers;

namespace {

std::string usage_message(std::vector<std::string> args) {
  engine::TrainConfig c;
  try {
    engine::parse_train_args(args, c);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("cpu-staged: device memory is checked on every call", "[staged]") {
  auto be = make_backend("cpu-staged");
  CHECK(be->discrete_memory());
  CHECK_FALSE(make_backend("cpu")->discrete_memory());
  auto a = be->allocate(16), b = be->allocate(16);
  std::vector<float> host(16, 1.5f);
  be->upload(host.data(), a.get(), 16 * sizeof(float));
  be->relu_forward(a.get(), b.get(), 16);
  std::vector<float> back(16, 0.0f);
  be->download(b.get(), back.data(), 16 * sizeof(float));
  CHECK(back == host);
  // Host memory where the device is expected: an error naming the call.
  CHECK_THROWS_WITH(be->relu_forward(host.data(), b.get(), 16), Catch::Contains("relu forward") && Catch::Contains("x"));
  // A range running past an allocation's end.
  CHECK_THROWS_AS(be->relu_forward(a.get() + 8, b.get(), 16), Error);
  CHECK_THROWS_AS(be->download(a.get(), back.data(), 17 * sizeof(float)), Error);
  // Device memory where the host is expected.
  CHECK_THROWS_WITH(be->download(a.get(), b.get(), 4), Catch::Contains("device pointer used as host"));
  CHECK_THROWS_WITH(be->upload(b.get(), a.get(), 4), Catch::Contains("device pointer used as host"));
  // Labels must be on the device too.
  std::vector<int32_t> labels{0, 1};
  auto probs = be->allocate(8);
  CHECK_THROWS_WITH(be->softmax_xent_forward(a.get(), labels.data(), 2, 4, probs.get(), nullptr),
                    Catch::Contains("labels"));
  const size_t before = staged_device_bytes(*be);
  { auto c = be->allocate(100); CHECK(staged_device_bytes(*be) == before + 400); }
  CHECK(staged_device_bytes(*be) == before);
  // A freed allocation is no longer device memory (others stay live around it).
  // Checked before anything else is allocated, so that no new allocation can
  // have reused its address: the check always runs.
  float* dangling = nullptr;
  { auto c = be->allocate(4); dangling = c.get(); }
  CHECK_THROWS_AS(be->fill(dangling, 4, 0.0f), Error);
  const StagedCounts n = staged_counts(*be);
  CHECK(n.uploads == 1);
  CHECK(n.downloads == 1);
}

TEST_CASE("cpu-staged: host staging memory starts as NaN", "[staged]") {
  auto be = make_backend("cpu-staged");
  void* p = be->host_alloc(64);
  const auto* f = static_cast<const float*>(p);
  for (int i = 0; i < 16; ++i) CHECK(std::isnan(f[i]));
  be->host_free(p);
}

// That cpu-staged computes bitwise what it wraps, kernel by kernel and over a
// training step of lenet5 and resnet20: "backend ops: cpu-staged wrapping the
// reference is bitwise the reference" (tests/backend_ops.cpp).
TEST_CASE("cpu-staged: a net refuses a host input, as a GPU would", "[staged]") {
  auto st = make_staged_backend(make_reference_backend());
  ModelOptions mo;
  mo.minibatch = 3;
  Net ns = make_model("lenet5", mo);
  ns.finalize(*st, 5);
  const Shape in = ns.input_shape();
  const Shape xs(3, in.c(), in.h(), in.w());
  std::vector<float> x(static_cast<size_t>(xs.numel()), 0.5f);
  CHECK_THROWS_AS(ns.forward(Tensor::view(x.data(), xs), true), Error);
}

TEST_CASE("train options: --workspace-mb, --tf32, --device are validated naming the key", "[config][staged]") {
  engine::TrainConfig c;
  REQUIRE(engine::parse_train_args({"--train-data", "a.h5", "--device", "cpu-staged", "--workspace-mb", "64", "--tf32", "true"}, c));
  CHECK(c.device == engine::Device::cpu_staged);
  CHECK(c.workspace_mb == 64);
  CHECK(c.tf32);
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--workspace-mb", "-1"}), Catch::Contains("workspace-mb"));
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--workspace-mb", "lots"}), Catch::Contains("workspace-mb"));
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--tf32", "maybe"}), Catch::Contains("tf32"));
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--device", "gpu"}), Catch::Contains("device"));
#ifdef DTRAIN_HAVE_CUDA
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--device", "cuda", "--reference-kernels", "true"}),
             Catch::Contains("reference-kernels"));
#else
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--device", "cuda"}),
             Catch::Contains("device") && Catch::Contains("built without the CUDA backend"));
#endif
}
