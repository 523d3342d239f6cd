// tests/test_reference_grad.cpp — finite-difference gradient checks of the
// reference backend's conv, pooling and linear kernels.
//
// Scalar under test: L = Σ r·y for a fixed random r, so dy = r. Gradient outputs
// are pre-filled with NaN, which also checks that backward OVERWRITES them.
//
// Tolerances. Conv, linear and average pooling are linear in each probed input,
// so central differences have no truncation error and the probe can be large
// (ε = 0.1); what is left is the float rounding of y (2⁻²⁴·|y| per output)
// divided by 2ε: observed max error 5e-5 (error measure in gradcheck.hpp). Max
// pooling is probed with ε = 1e-2 on inputs 0.1 apart, so no argmax moves
// (observed 1e-7). The bound 1e-3 is 20× above the observed noise and far below
// what an indexing mistake produces: a wrong group offset, tap or stride gives
// errors of order 1, and even a 1 % error in one filter's dw is caught (checked
// by hand-injected mutations; the self-test at the bottom requires the checker to
// flag a 5 % gradient error).

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

constexpr double kLinearTol = 1e-3;  // see the file comment

// A large probe for functions linear in the probed input: no truncation error,
// and 10× less rounding noise than ε = 1e-2.
GradCheckOptions linear_probe() {
  GradCheckOptions o;
  o.eps = 0.1;
  return o;
}
const float kNaN = std::numeric_limits<float>::quiet_NaN();

size_t conv_out_size(const ConvDesc& d) { return size_t(d.n) * d.k * d.out_h() * d.out_w(); }

void check_conv(const ConvDesc& d, uint64_t seed) {
  auto be = make_reference_backend();
  auto conv = be->conv(d);
  const size_t nx = size_t(d.n) * d.c * d.h * d.w;
  const size_t nw = size_t(d.k) * (d.c / d.groups) * d.kh * d.kw;
  auto x = dtrain::test::random_uniform(nx, seed);
  auto w = dtrain::test::random_uniform(nw, seed + 1);
  auto b = dtrain::test::random_uniform(size_t(d.k), seed + 2);
  auto r = dtrain::test::random_uniform(conv_out_size(d), seed + 3);
  std::vector<float> y(conv_out_size(d), kNaN), dx(nx, kNaN), dw(nw, kNaN), db(size_t(d.k), kNaN);
  const float* bp = d.bias ? b.data() : nullptr;
  auto loss = [&] {
    conv->forward(x.data(), w.data(), bp, y.data());
    return dot(r, y);
  };
  loss();
  conv->backward(x.data(), w.data(), r.data(), dx.data(), dw.data(), d.bias ? db.data() : nullptr);

  auto rx = check_gradient(x, dx, loss, linear_probe());
  INFO("dx " << rx.str());
  CHECK(rx.max_error < kLinearTol);
  auto rw = check_gradient(w, dw, loss, linear_probe());
  INFO("dw " << rw.str());
  CHECK(rw.max_error < kLinearTol);
  if (d.bias) {
    auto rb = check_gradient(b, db, loss, linear_probe());
    INFO("db " << rb.str());
    CHECK(rb.max_error < kLinearTol);
  }

  // dx == nullptr (first layer): dw and db are unchanged.
  std::vector<float> dw2(nw, kNaN), db2(size_t(d.k), kNaN);
  conv->backward(x.data(), w.data(), r.data(), nullptr, dw2.data(), d.bias ? db2.data() : nullptr);
  CHECK(dw2 == dw);
  if (d.bias) CHECK(db2 == db);
}

}  // namespace

TEST_CASE("reference conv gradients", "[reference][conv][grad]") {
  ConvDesc d;
  SECTION("N=3 C=5 7x7, K=4 3x3, stride 2, pad 1") {
    d.n = 3, d.c = 5, d.h = d.w = 7, d.k = 4, d.kh = d.kw = 3, d.stride_h = d.stride_w = 2,
    d.pad_h = d.pad_w = 1;
    check_conv(d, 11);
  }
  SECTION("groups=2, C=4, K=6, 3x3, pad 1") {
    d.n = 2, d.c = 4, d.h = d.w = 6, d.k = 6, d.kh = d.kw = 3, d.pad_h = d.pad_w = 1, d.groups = 2;
    check_conv(d, 12);
  }
  SECTION("groups=2, N=3 C=6 7x7, K=4, stride 2, pad 1") {
    d.n = 3, d.c = 6, d.h = d.w = 7, d.k = 4, d.kh = d.kw = 3, d.stride_h = d.stride_w = 2,
    d.pad_h = d.pad_w = 1, d.groups = 2;
    check_conv(d, 13);
  }
  SECTION("depthwise: groups=C=5, K=10, no bias") {
    d.n = 2, d.c = 5, d.h = d.w = 5, d.k = 10, d.kh = d.kw = 3, d.pad_h = d.pad_w = 1,
    d.groups = 5, d.bias = false;
    check_conv(d, 14);
  }
  SECTION("non-square: 3x2 kernel, stride 2x1, pad 1x0, 1x1-free borders") {
    d.n = 2, d.c = 3, d.h = 6, d.w = 5, d.k = 2, d.kh = 3, d.kw = 2, d.stride_h = 2,
    d.stride_w = 1, d.pad_h = 1, d.pad_w = 0;
    check_conv(d, 15);
  }
  SECTION("1x1 kernel, stride 2 (ResNet shortcut)") {
    d.n = 2, d.c = 3, d.h = d.w = 5, d.k = 4, d.stride_h = d.stride_w = 2, d.bias = false;
    check_conv(d, 16);
  }
}

TEST_CASE("reference linear gradients", "[reference][linear][grad]") {
  for (bool bias : {true, false}) {
    LinearDesc d;
    d.n = 3, d.in = 7, d.out = 5, d.bias = bias;
    auto be = make_reference_backend();
    auto lin = be->linear(d);
    auto x = dtrain::test::random_uniform(size_t(d.n) * d.in, 21);
    auto w = dtrain::test::random_uniform(size_t(d.out) * d.in, 22);
    auto b = dtrain::test::random_uniform(size_t(d.out), 23);
    auto r = dtrain::test::random_uniform(size_t(d.n) * d.out, 24);
    std::vector<float> y(r.size()), dx(x.size(), kNaN), dw(w.size(), kNaN), db(b.size(), kNaN);
    const float* bp = bias ? b.data() : nullptr;
    auto loss = [&] {
      lin->forward(x.data(), w.data(), bp, y.data());
      return dot(r, y);
    };
    lin->backward(x.data(), w.data(), r.data(), dx.data(), dw.data(), bias ? db.data() : nullptr);
    auto rx = check_gradient(x, dx, loss, linear_probe());
    INFO("bias " << bias << " dx " << rx.str());
    CHECK(rx.max_error < kLinearTol);
    auto rw = check_gradient(w, dw, loss, linear_probe());
    INFO("dw " << rw.str());
    CHECK(rw.max_error < kLinearTol);
    if (bias) {
      auto rb = check_gradient(b, db, loss, linear_probe());
      INFO("db " << rb.str());
      CHECK(rb.max_error < kLinearTol);
    }
  }
}

namespace {

void check_pool(const PoolDesc& d, uint64_t seed) {
  auto be = make_reference_backend();
  auto pool = be->pool(d);
  const size_t nx = size_t(d.n) * d.c * d.h * d.w, ny = size_t(d.n) * d.c * d.out_h() * d.out_w();
  // Max pooling: distinct values 0.1 apart, so probes of ±1e-2 never move an argmax.
  auto x = d.kind == PoolKind::max ? dtrain::test::random_distinct(nx, seed)
                                   : dtrain::test::random_uniform(nx, seed);
  auto r = dtrain::test::random_uniform(ny, seed + 1);
  std::vector<float> y(ny), dx(nx, kNaN);
  auto loss = [&] {
    pool->forward(x.data(), y.data());
    return dot(r, y);
  };
  loss();
  pool->backward(x.data(), y.data(), r.data(), dx.data());
  // Max pooling: ε = 1e-2 stays below half the 0.1 gap between input values.
  auto res = check_gradient(x, dx, loss,
                            d.kind == PoolKind::max ? GradCheckOptions{} : linear_probe());
  INFO(res.str());
  CHECK(res.max_error < kLinearTol);
}

}  // namespace

TEST_CASE("reference pooling gradients", "[reference][pool][grad]") {
  PoolDesc d;
  d.n = 2, d.c = 3, d.h = d.w = 7, d.kh = d.kw = 3;
  SECTION("max 3x3 stride 2 pad 1 (overlapping windows)") {
    d.stride_h = d.stride_w = 2, d.pad_h = d.pad_w = 1, d.kind = PoolKind::max;
    check_pool(d, 31);
  }
  SECTION("max 2x2 stride 2, odd input (floor mode drops the last row)") {
    d.kh = d.kw = 2, d.stride_h = d.stride_w = 2, d.kind = PoolKind::max;
    check_pool(d, 32);
  }
  SECTION("max 3x3 stride 1 pad 1") {
    d.pad_h = d.pad_w = 1, d.kind = PoolKind::max;
    check_pool(d, 33);
  }
  SECTION("avg 3x3 stride 2 pad 1, include pad") {
    d.stride_h = d.stride_w = 2, d.pad_h = d.pad_w = 1, d.kind = PoolKind::avg,
    d.avg_include_pad = true;
    check_pool(d, 34);
  }
  SECTION("avg 3x3 stride 2 pad 1, exclude pad") {
    d.stride_h = d.stride_w = 2, d.pad_h = d.pad_w = 1, d.kind = PoolKind::avg,
    d.avg_include_pad = false;
    check_pool(d, 35);
  }
  SECTION("avg 2x3 stride 1x2, pad 1x1, exclude pad") {
    d.kh = 2, d.kw = 3, d.stride_h = 1, d.stride_w = 2, d.pad_h = 1, d.pad_w = 1,
    d.kind = PoolKind::avg, d.avg_include_pad = false;
    check_pool(d, 36);
  }
  SECTION("global average (7x7 window)") {
    d.kh = d.kw = 7, d.kind = PoolKind::avg;
    check_pool(d, 37);
  }
}

// The checker itself must catch a wrong gradient: f(x) = Σ x³ with an analytic
// gradient that is off by 5 %, and one whose single entry is wrong.
TEST_CASE("gradcheck catches wrong gradients", "[reference][gradcheck]") {
  auto x = dtrain::test::random_away_from_zero(50, 41, 0.2f);
  auto f = [&] {
    double s = 0.0;
    for (float v : x) s += double(v) * v * v;
    return s;
  };
  std::vector<float> good(x.size()), scaled(x.size()), one_off(x.size());
  for (size_t i = 0; i < x.size(); ++i) good[i] = scaled[i] = one_off[i] = 3.0f * x[i] * x[i];
  for (auto& g : scaled) g *= 1.05f;
  one_off[17] = -one_off[17];
  GradCheckOptions opt;
  opt.eps = 1e-3;  // truncation error of x³ is ε² = 1e-6 here
  const auto before = x;
  CHECK(check_gradient(x, good, f, opt).max_error < 1e-3);
  CHECK(x == before);  // probes restore x
  CHECK(check_gradient(x, scaled, f, opt).max_error > 0.04);
  auto r = check_gradient(x, one_off, f, opt);
  CHECK(r.max_error > 1.0);
  CHECK(r.worst == 17);
  opt.max_checks = 10;
  CHECK(check_gradient(x, good, f, opt).checked == 10);
}

// Kink detection: f(x) = Σ |x| with one element closer to 0 than ε. Without it the
// kink element fails; with it that element (and only it) is skipped.
TEST_CASE("gradcheck skips kinks when asked", "[reference][gradcheck]") {
  auto x = dtrain::test::random_away_from_zero(40, 42, 0.2f);
  x[7] = 0.003f;
  auto f = [&] {
    double s = 0.0;
    for (float v : x) s += std::abs(double(v));
    return s;
  };
  std::vector<float> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) grad[i] = x[i] > 0 ? 1.0f : -1.0f;
  GradCheckOptions opt;  // ε = 1e-2 crosses the kink at x[7]
  auto plain = check_gradient(x, grad, f, opt);
  CHECK(plain.max_error > 0.5);
  CHECK(plain.worst == 7);
  opt.kink_tol = 0.5;
  auto r = check_gradient(x, grad, f, opt);
  INFO(r.str());
  CHECK(r.skipped == 1);
  CHECK(r.checked == 39);
  CHECK(r.max_error < 1e-4);
  grad[3] = -grad[3];  // a wrong gradient away from the kink is still caught
  CHECK(check_gradient(x, grad, f, opt).max_error > 1.0);
}
