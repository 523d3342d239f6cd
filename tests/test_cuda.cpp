// tests/test_cuda.cpp — what the CUDA backend promises beyond the backend
// contract: byte-wise transfers, the convolution algorithm report and the
// workspace budget (the tuner's inputs). Its kernels against the reference,
// forward and backward, are the backend table (tests/backend_ops.cpp,
// "backend ops: cuda …"). Tagged [cuda]: dtrain_cuda_tests reports them as
// skipped without a GPU (tests/cuda_main.cpp).
#include <cstdint>
#include <cstring>

#include "tests/cuda_test_util.hpp"

namespace dtrain::layers::test {
namespace {

TEST_CASE("cuda: int32 labels travel through the byte-wise upload/download", "[cuda]") {
  Both b;
  std::vector<int32_t> labels{3, 0, 7, 1}, back(4);
  float* dl = b.zeros(4);
  b.gpu->upload(labels.data(), dl, 16);
  b.gpu->download(dl, back.data(), 16);
  CHECK(back == labels);
}

size_t conv_out(const ConvDesc& d) { return size_t(d.n) * d.k * d.out_h() * d.out_w(); }

// The algorithm report after one forward and backward (values: the backend table).
void check_conv_report(const ConvDesc& d, bool want_dx) {
  Both b;
  auto kg = b.gpu->conv(d);
  std::mt19937 rng(5);
  const size_t xn = size_t(d.n) * d.c * d.h * d.w, wn = size_t(d.k) * (d.c / d.groups) * d.kh * d.kw;
  float *gx = b.up(random_vec(xn, rng)), *gw = b.up(random_vec(wn, rng)), *gb = b.zeros(size_t(d.k));
  float *gdy = b.up(random_vec(conv_out(d), rng)), *gy = b.zeros(conv_out(d));
  float *gdx = b.zeros(xn), *gdw = b.zeros(wn), *gdb = b.zeros(size_t(d.k));
  kg->forward(gx, gw, d.bias ? gb : nullptr, gy);
  kg->backward(gx, gw, gdy, want_dx ? gdx : nullptr, gdw, d.bias ? gdb : nullptr);
  const auto rep = cuda_conv_report(*b.gpu);
  REQUIRE(rep.size() == 1);
  CHECK(rep[0].forward.chosen);
  CHECK(rep[0].backward_filter.chosen);
  CHECK(rep[0].backward_data.chosen == want_dx);
  CHECK(rep[0].workspace_bytes() <= quiet_options().workspace_bytes);
}

TEST_CASE("cuda: convolution algorithm report (one choice per pass, within the budget)", "[cuda]") {
  SECTION("3x3 pad 1") { check_conv_report({3, 5, 7, 7, 4, 3, 3, 1, 1, 1, 1, 1, true, {}}, true); }
  SECTION("11x11 stride 4 pad 2, first layer (no dx)") {
    check_conv_report({2, 3, 31, 31, 8, 11, 11, 4, 4, 2, 2, 1, true, {}}, false);
  }
}

TEST_CASE("cuda: a zero workspace budget keeps algorithms that need none", "[cuda]") {
  CudaOptions o = quiet_options();
  o.workspace_bytes = 0;
  Both b(o);
  ConvDesc d{2, 8, 12, 12, 8, 3, 3, 1, 1, 1, 1, 1, true, {}};
  auto k = b.gpu->conv(d);
  const size_t xn = size_t(d.n) * d.c * d.h * d.w, wn = size_t(d.k) * d.c * 9;
  std::mt19937 rng(6);
  float *x = b.up(random_vec(xn, rng)), *w = b.up(random_vec(wn, rng)), *bb = b.zeros(8);
  float *y = b.zeros(conv_out(d)), *dy = b.up(random_vec(conv_out(d), rng));
  float *dx = b.zeros(xn), *dw = b.zeros(wn), *db = b.zeros(8);
  k->forward(x, w, bb, y);
  k->backward(x, w, dy, dx, dw, db);
  const auto rep = cuda_conv_report(*b.gpu);
  REQUIRE(rep.size() == 1);
  CHECK(rep[0].workspace_bytes() == 0);
  CHECK(rep[0].activation_bytes_per_sample == (8 * 144 + 8 * 144) * sizeof(float));
  CHECK(cuda_workspace_bytes(*b.gpu) == 0);
}

}  // namespace
}  // namespace dtrain::layers::test
