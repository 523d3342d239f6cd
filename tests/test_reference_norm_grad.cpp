// tests/test_reference_norm_grad.cpp — finite-difference gradient checks of the
// reference backend's nonlinear layers: LRN, batch norm (training), ReLU,
// dropout and softmax cross-entropy.
//
// Scalar under test: L = Σ r·y (dy = r) for LRN, batch norm, ReLU and dropout;
// the returned loss · scale for softmax cross-entropy. Gradient outputs are
// pre-filled with NaN (backward must overwrite them).
//
// Tolerances. These functions are curved, so central differences carry a
// truncation error ~ ε²·|f‴|/6 besides the float rounding noise of L
// (~2⁻²⁴·|y|/2ε per affected output). ε = 1e-2 balances the two: observed max
// error 4e-4 (LRN), 2e-4 (batch norm dx), 2e-5 (softmax); ε = 1e-3 was worse
// (3e-3, rounding-dominated). The bound 1e-2 is 25× the worst observed, while a
// mistake in a derivative (the cross-channel term of LRN, a window off by one,
// the mean term of batch norm, a missing scale) gives errors of order 0.1–1.
// ReLU and dropout are piecewise linear (inputs kept away from the kink), so
// they use the 1e-3 bound of the linear layers.

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "layers/cpu/reference.hpp"
#include "tests/gradcheck.hpp"

using namespace dtrain::layers;
using dtrain::test::check_gradient;
using dtrain::test::dot;
using dtrain::test::GradCheckOptions;

namespace {

constexpr double kCurvedTol = 1e-2;   // see the file comment
constexpr double kLinearTol = 1e-3;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

GradCheckOptions curved() {
  GradCheckOptions o;
  o.eps = 1e-2;
  return o;
}

void check_lrn(const LrnDesc& d, uint64_t seed) {
  auto be = make_reference_backend();
  auto lrn = be->lrn(d);
  const size_t n = size_t(d.n) * d.c * d.h * d.w;
  auto x = dtrain::test::random_uniform(n, seed, -2.0f, 2.0f);
  auto r = dtrain::test::random_uniform(n, seed + 1);
  std::vector<float> y(n), dx(n, kNaN);
  auto loss = [&] {
    lrn->forward(x.data(), y.data());
    return dot(r, y);
  };
  loss();
  lrn->backward(x.data(), y.data(), r.data(), dx.data());
  auto res = check_gradient(x, dx, loss, curved());
  INFO(res.str());
  CHECK(res.max_error < kCurvedTol);
}

}  // namespace

TEST_CASE("reference LRN gradients", "[reference][lrn][grad]") {
  LrnDesc d;
  d.n = 2, d.h = 3, d.w = 4;
  // α large enough that the cross-channel term of the derivative matters (with
  // AlexNet's α = 1e-4 it is ~1e-4 of the gradient and no test could see it).
  d.alpha = 1.0f, d.beta = 0.75f, d.k = 2.0f;
  SECTION("size 5, C=5") { d.size = 5, d.c = 5; check_lrn(d, 51); }
  SECTION("size 5, C=7") { d.size = 5, d.c = 7; check_lrn(d, 52); }
  SECTION("size 3, C=7") { d.size = 3, d.c = 7; check_lrn(d, 53); }
  SECTION("size 3, C=5, β=0.5, k=1") {
    d.size = 3, d.c = 5, d.beta = 0.5f, d.k = 1.0f;
    check_lrn(d, 54);
  }
  SECTION("even size 4 (asymmetric window), C=6") { d.size = 4, d.c = 6; check_lrn(d, 55); }
  SECTION("AlexNet constants: size 5, α=1e-4, β=0.75, k=2, C=7") {
    d.size = 5, d.c = 7, d.alpha = 1e-4f;
    check_lrn(d, 56);
  }
}

TEST_CASE("reference batch norm training gradients", "[reference][batchnorm][grad]") {
  BatchNormDesc d;
  d.n = 3, d.c = 4, d.h = 3, d.w = 2;
  auto be = make_reference_backend();
  auto bn = be->batch_norm(d);
  const size_t n = size_t(d.n) * d.c * d.h * d.w;
  auto x = dtrain::test::random_uniform(n, 61, -1.0f, 3.0f);
  auto gamma = dtrain::test::random_uniform(size_t(d.c), 62, 0.5f, 1.5f);
  auto beta = dtrain::test::random_uniform(size_t(d.c), 63);
  auto r = dtrain::test::random_uniform(n, 64);
  std::vector<float> y(n), rm(size_t(d.c)), rv(size_t(d.c), 1.0f);
  std::vector<float> dx(n, kNaN), dgamma(size_t(d.c), kNaN), dbeta(size_t(d.c), kNaN);
  auto loss = [&] {
    bn->forward_train(x.data(), gamma.data(), beta.data(), y.data(), rm.data(), rv.data());
    return dot(r, y);
  };
  loss();
  bn->backward(x.data(), r.data(), gamma.data(), dx.data(), dgamma.data(), dbeta.data());
  auto rx = check_gradient(x, dx, loss, curved());
  INFO("dx " << rx.str());
  CHECK(rx.max_error < kCurvedTol);
  auto rg = check_gradient(gamma, dgamma, loss, curved());
  INFO("dgamma " << rg.str());
  CHECK(rg.max_error < kCurvedTol);
  auto rb = check_gradient(beta, dbeta, loss, curved());
  INFO("dbeta " << rb.str());
  CHECK(rb.max_error < kCurvedTol);
  // Σ_x dx = 0 per channel (the mean is subtracted), a property FD alone does not stress.
  const size_t plane = size_t(d.h) * d.w;
  for (int c = 0; c < d.c; ++c) {
    double s = 0.0;
    for (int i = 0; i < d.n; ++i)
      for (size_t p = 0; p < plane; ++p) s += dx[(size_t(i) * d.c + c) * plane + p];
    CHECK(std::abs(s) < 1e-5);
  }
}

TEST_CASE("reference ReLU gradient", "[reference][relu][grad]") {
  auto be = make_reference_backend();
  const size_t n = 200;
  auto x = dtrain::test::random_away_from_zero(n, 71);
  auto r = dtrain::test::random_uniform(n, 72);
  std::vector<float> y(n), dx(n, kNaN);
  auto loss = [&] {
    be->relu_forward(x.data(), y.data(), n);
    return dot(r, y);
  };
  loss();
  be->relu_backward(y.data(), r.data(), dx.data(), n);
  auto res = check_gradient(x, dx, loss);
  INFO(res.str());
  CHECK(res.max_error < kLinearTol);
  size_t zeros = 0;
  for (size_t i = 0; i < n; ++i) zeros += dx[i] == 0.0f;
  CHECK(zeros > 50);  // about half the inputs are negative: the test sees both branches
  CHECK(zeros < 150);
}

TEST_CASE("reference dropout gradient and mask", "[reference][dropout][grad]") {
  auto be = make_reference_backend();
  const size_t n = 4000;
  const float p = 0.3f;
  const uint64_t seed = 1234;
  auto x = dtrain::test::random_uniform(n, 81);
  auto r = dtrain::test::random_uniform(n, 82);
  std::vector<float> y(n), mask(n), dx(n, kNaN);
  auto loss = [&] {
    be->dropout_forward(x.data(), y.data(), mask.data(), n, p, seed);
    return dot(r, y);
  };
  loss();
  be->dropout_backward(mask.data(), r.data(), dx.data(), n);
  GradCheckOptions opt;
  opt.max_checks = 400;
  auto res = check_gradient(x, dx, loss, opt);
  INFO(res.str());
  CHECK(res.max_error < kLinearTol);

  // The mask is exactly the contract's: 1/(1−p) iff dropout_uniform(seed, i) ≥ p.
  size_t kept = 0, wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool keep = dropout_uniform(seed, i) >= p;
    kept += keep;
    wrong += mask[i] != (keep ? 1.0f / (1.0f - p) : 0.0f);
  }
  CHECK(wrong == 0);
  CHECK(std::abs(double(kept) / n - (1.0 - p)) < 0.03);  // ~4σ for n = 4000
}

TEST_CASE("reference softmax cross-entropy gradient", "[reference][softmax][grad]") {
  auto be = make_reference_backend();
  const int n = 4, k = 6;
  const float scale = 1.0f / 32.0f;  // 1 / global minibatch
  auto z = dtrain::test::random_uniform(size_t(n) * k, 91, -3.0f, 3.0f);
  std::vector<int32_t> labels{2, 0, 5, 3};
  std::vector<float> probs(z.size()), dz(z.size(), kNaN);
  int64_t correct = -1;
  auto loss = [&] {
    return be->softmax_xent_forward(z.data(), labels.data(), n, k, probs.data(), &correct) * scale;
  };
  loss();
  be->softmax_xent_backward(probs.data(), labels.data(), n, k, scale, dz.data());
  auto res = check_gradient(z, dz, loss, curved());
  INFO(res.str());
  CHECK(res.max_error < kCurvedTol);
  for (int i = 0; i < n; ++i) {
    double s = 0.0;
    for (int j = 0; j < k; ++j) s += probs[size_t(i) * k + j];
    CHECK(s == Approx(1.0).epsilon(1e-6));
  }
}
