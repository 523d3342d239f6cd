// tests/test_reference_forward.cpp — hand-computed forward results of the
// reference backend (tiny inputs whose answers are worked out in the comments),
// plus storage, elementwise ops, SGD and descriptor validation.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "layers/cpu/reference.hpp"

using namespace dtrain::layers;

namespace {
// x = 1..9 as a 3x3 plane.
const std::vector<float> k123 = {1, 2, 3, 4, 5, 6, 7, 8, 9};
}  // namespace

TEST_CASE("reference backend identity and storage", "[reference]") {
  auto be = make_reference_backend();
  CHECK(be->name() == "reference");
  CHECK(be->device() == Device::cpu);
  auto p = be->allocate(1000);
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(p.get()) % 64 == 0);
  bool zero = true;
  for (int i = 0; i < 1000; ++i) zero = zero && p.get()[i] == 0.0f;
  CHECK(zero);
  CHECK(be->allocate(0) != nullptr);
  be->fill(p.get(), 10, 2.5f);
  CHECK(p.get()[9] == 2.5f);
  CHECK(p.get()[10] == 0.0f);
  std::vector<float> dst(10);
  be->copy(p.get(), dst.data(), 10);
  CHECK(dst == std::vector<float>(10, 2.5f));
  std::vector<float> a{1, 2, 3}, b{10, 20, 30}, y(3);
  be->add(a.data(), b.data(), y.data(), 3);
  CHECK(y == std::vector<float>{11, 22, 33});
  be->accumulate(a.data(), y.data(), 3);
  CHECK(y == std::vector<float>{12, 24, 36});
  std::vector<float> rx{-1.0f, 0.0f, 2.0f}, ry(3), rdx(3);
  be->relu_forward(rx.data(), ry.data(), 3);
  CHECK(ry == std::vector<float>{0, 0, 2});
  std::vector<float> rdy{5, 6, 7};
  be->relu_backward(ry.data(), rdy.data(), rdx.data(), 3);
  CHECK(rdx == std::vector<float>{0, 0, 7});  // y = 0 passes no gradient
}

TEST_CASE("reference conv forward, hand-computed", "[reference][conv]") {
  auto be = make_reference_backend();
  SECTION("3x3 ones kernel, pad 1, bias 0.5: neighbourhood sums") {
    ConvDesc d;
    d.h = d.w = 3, d.kh = d.kw = 3, d.pad_h = d.pad_w = 1;
    auto conv = be->conv(d);
    std::vector<float> w(9, 1.0f), b{0.5f}, y(9);
    conv->forward(k123.data(), w.data(), b.data(), y.data());
    // 1+2+4+5, 1+…+6, 2+3+5+6 / 1+2+4+5+7+8, 45, 2+3+5+6+8+9 / 4+5+7+8, 4+…+9, 5+6+8+9
    CHECK(y == std::vector<float>{12.5f, 21.5f, 16.5f, 27.5f, 45.5f, 33.5f, 24.5f, 39.5f, 28.5f});
  }
  SECTION("2x2 kernel [[1,0],[0,-1]]: cross-correlation, not convolution") {
    ConvDesc d;
    d.h = d.w = 3, d.kh = d.kw = 2, d.bias = false;
    auto conv = be->conv(d);
    std::vector<float> w{1, 0, 0, -1}, y(4);
    conv->forward(k123.data(), w.data(), nullptr, y.data());
    CHECK(y == std::vector<float>(4, -4.0f));  // x[i][j] − x[i+1][j+1]; flipped would be +4
  }
  SECTION("stride 2 picks every other window") {
    ConvDesc d;
    d.h = d.w = 3, d.stride_h = d.stride_w = 2, d.bias = false;  // 1x1 kernel
    auto conv = be->conv(d);
    std::vector<float> w{2.0f}, y(4);
    conv->forward(k123.data(), w.data(), nullptr, y.data());
    CHECK(y == std::vector<float>{2, 6, 14, 18});
  }
  SECTION("groups=2 keep channels apart") {
    ConvDesc d;
    d.c = 2, d.k = 4, d.h = d.w = 1, d.groups = 2, d.bias = false;
    auto conv = be->conv(d);
    // w [4, 1, 1, 1]: k0, k1 read channel 0; k2, k3 read channel 1
    std::vector<float> x{3, 5}, w{1, 2, 10, 20}, y(4);
    conv->forward(x.data(), w.data(), nullptr, y.data());
    CHECK(y == std::vector<float>{3, 6, 50, 100});
  }
  SECTION("backward of the 2x2 kernel, dy = ones") {
    ConvDesc d;
    d.h = d.w = 3, d.kh = d.kw = 2;
    auto conv = be->conv(d);
    std::vector<float> w{1, 0, 0, -1}, dy(4, 1.0f), dx(9, -7.0f), dw(4, -7.0f), db(1, -7.0f);
    conv->backward(k123.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data());
    // dw[i][j] = Σ of the 2x2 block of x starting at (i, j)
    CHECK(dw == std::vector<float>{12, 16, 24, 28});
    CHECK(db == std::vector<float>{4});
    // dx = +1 on the top-left 2x2, −1 on the bottom-right 2x2
    CHECK(dx == std::vector<float>{1, 1, 0, 1, 0, -1, 0, -1, -1});
  }
}

TEST_CASE("reference pooling forward, hand-computed", "[reference][pool]") {
  auto be = make_reference_backend();
  SECTION("max 2x2 stride 2, then backward routes dy to the argmax") {
    PoolDesc d;
    d.h = d.w = 4, d.kh = d.kw = 2, d.stride_h = d.stride_w = 2, d.kind = PoolKind::max;
    auto pool = be->pool(d);
    std::vector<float> x{1, 5, 2, 0,  //
                         3, 4, 8, 1,  //
                         0, -1, 6, 7,  //
                         2, 9, 3, 3};
    std::vector<float> y(4), dy{1, 2, 3, 4}, dx(16, -7.0f);
    pool->forward(x.data(), y.data());
    CHECK(y == std::vector<float>{5, 8, 9, 7});
    pool->backward(x.data(), y.data(), dy.data(), dx.data());
    CHECK(dx == std::vector<float>{0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 4, 0, 3, 0, 0});
  }
  SECTION("max: ties go to the first element, padding is −inf") {
    PoolDesc d;
    d.h = d.w = 2, d.kh = d.kw = 2, d.pad_h = d.pad_w = 1, d.kind = PoolKind::max;
    auto pool = be->pool(d);  // output 3x3, stride 1
    std::vector<float> x{-3, -3, -3, -3}, y(9), dy(9, 1.0f), dx(4);
    pool->forward(x.data(), y.data());
    CHECK(y == std::vector<float>(9, -3.0f));  // never the 0 of zero padding
    pool->backward(x.data(), y.data(), dy.data(), dx.data());
    // each window's first real element: windows cover (row, col) pairs; the top-left
    // element is first in the 4 windows that contain it, (0,1) in 2, (1,0) in 2, (1,1) in 1
    CHECK(dx == std::vector<float>{4, 2, 2, 1});
  }
  SECTION("avg 3x3 stride 1 pad 1 of ones: include vs exclude padding") {
    PoolDesc d;
    d.h = d.w = 3, d.kh = d.kw = 3, d.pad_h = d.pad_w = 1, d.kind = PoolKind::avg;
    std::vector<float> x(9, 1.0f), y(9);
    d.avg_include_pad = true;
    be->pool(d)->forward(x.data(), y.data());
    CHECK(y[0] == Approx(4.0 / 9));  // corner: 4 real of 9
    CHECK(y[1] == Approx(6.0 / 9));
    CHECK(y[4] == Approx(1.0));
    d.avg_include_pad = false;
    be->pool(d)->forward(x.data(), y.data());
    CHECK(y == std::vector<float>(9, 1.0f));
  }
}

TEST_CASE("reference LRN forward, hand-computed", "[reference][lrn]") {
  auto be = make_reference_backend();
  LrnDesc d;
  d.c = 3, d.beta = 1.0f, d.k = 1.0f;
  std::vector<float> x{1, 2, 3}, y(3);
  SECTION("size 3, α/size = 1: windows {0,1}, {0,1,2}, {1,2}") {
    d.size = 3, d.alpha = 3.0f;
    be->lrn(d)->forward(x.data(), y.data());
    CHECK(y[0] == Approx(1.0 / 6));   // 1 + (1 + 4)
    CHECK(y[1] == Approx(2.0 / 15));  // 1 + (1 + 4 + 9)
    CHECK(y[2] == Approx(3.0 / 14));  // 1 + (4 + 9)
  }
  SECTION("size 2, α/size = 1: windows [c, c+1]") {
    d.size = 2, d.alpha = 2.0f;
    be->lrn(d)->forward(x.data(), y.data());
    CHECK(y[0] == Approx(1.0 / 6));
    CHECK(y[1] == Approx(2.0 / 14));
    CHECK(y[2] == Approx(3.0 / 10));
  }
}

TEST_CASE("reference batch norm forward and running statistics", "[reference][batchnorm]") {
  auto be = make_reference_backend();
  BatchNormDesc d;
  d.n = 4, d.c = 1, d.momentum = 0.1f, d.eps = 1e-5f;
  auto bn = be->batch_norm(d);
  std::vector<float> x{1, 2, 3, 4}, gamma{2.0f}, beta{0.5f}, y(4), rm{0.0f}, rv{1.0f};
  bn->forward_train(x.data(), gamma.data(), beta.data(), y.data(), rm.data(), rv.data());
  // μ = 2.5, biased σ² = 1.25 (normalises), unbiased 5/3 (running)
  const double is = 1.0 / std::sqrt(1.25 + 1e-5);
  CHECK(y[0] == Approx(2.0 * -1.5 * is + 0.5));
  CHECK(y[3] == Approx(2.0 * 1.5 * is + 0.5));
  CHECK(rm[0] == Approx(0.25));               // 0.9·0 + 0.1·2.5
  CHECK(rv[0] == Approx(0.9 + 0.1 * 5.0 / 3));  // 1.0666…
  // Inference uses the running statistics.
  std::vector<float> yi(4);
  bn->forward_infer(x.data(), gamma.data(), beta.data(), rm.data(), rv.data(), yi.data());
  CHECK(yi[1] == Approx(2.0 * (2.0 - 0.25) / std::sqrt(0.9 + 0.5 / 3 + 1e-5) + 0.5));
  // Batch-size-one statistics are undefined (torch raises too).
  BatchNormDesc one;
  std::vector<float> y1(1);
  CHECK_THROWS_AS(be->batch_norm(one)->forward_train(x.data(), gamma.data(), beta.data(),
                                                     y1.data(), rm.data(), rv.data()),
                  dtrain::Error);
}

TEST_CASE("reference linear forward, hand-computed", "[reference][linear]") {
  auto be = make_reference_backend();
  LinearDesc d;
  d.n = 1, d.in = 3, d.out = 2;
  std::vector<float> x{1, 2, 3}, w{1, 0, -1, 0.5f, 0.5f, 0.5f}, b{10, 20}, y(2);
  be->linear(d)->forward(x.data(), w.data(), b.data(), y.data());
  CHECK(y == std::vector<float>{8, 23});  // W is [OUT, IN]: rows (1,0,−1) and (.5,.5,.5)
}

TEST_CASE("reference softmax cross-entropy, hand-computed", "[reference][softmax]") {
  auto be = make_reference_backend();
  std::vector<float> z{0, 0, 1000, 0}, probs(4), dz(4);
  std::vector<int32_t> labels{1, 1};
  int64_t correct = -1;
  double loss = be->softmax_xent_forward(z.data(), labels.data(), 2, 2, probs.data(), &correct);
  // sample 0: log 2 (tie → argmax 0 ≠ label 1); sample 1: 1000 − 0 = 1000, finite
  CHECK(loss == Approx(std::log(2.0) + 1000.0));
  CHECK(correct == 0);
  CHECK(probs == std::vector<float>{0.5f, 0.5f, 1.0f, 0.0f});
  labels = {0, 0};
  loss = be->softmax_xent_forward(z.data(), labels.data(), 2, 2, probs.data(), &correct);
  CHECK(loss == Approx(std::log(2.0)));
  CHECK(correct == 2);
  be->softmax_xent_backward(probs.data(), labels.data(), 2, 2, 0.5f, dz.data());
  CHECK(dz == std::vector<float>{-0.25f, 0.25f, 0.0f, 0.0f});
  labels = {0, 2};
  CHECK_THROWS_AS(be->softmax_xent_forward(z.data(), labels.data(), 2, 2, probs.data(), &correct),
                  dtrain::Error);
}

TEST_CASE("reference SGD step, hand-computed", "[reference][sgd]") {
  auto be = make_reference_backend();
  std::vector<float> p{1.0f}, g{0.5f}, m{0.2f};
  be->sgd_update(p.data(), g.data(), m.data(), 1, 0.1f, 0.9f, 0.01f);
  // g' = 0.5 + 0.01·1 = 0.51; m = 0.9·0.2 + 0.51 = 0.69; p = 1 − 0.1·0.69 = 0.931
  CHECK(m[0] == Approx(0.69));
  CHECK(p[0] == Approx(0.931));
  be->sgd_update(p.data(), g.data(), m.data(), 1, 0.1f, 0.9f, 0.01f);
  // g' = 0.5 + 0.00931 = 0.50931; m = 0.621 + 0.50931 = 1.13031; p = 0.931 − 0.113031
  CHECK(m[0] == Approx(1.13031));
  CHECK(p[0] == Approx(0.817969));
}

TEST_CASE("reference dropout with p = 0 is the identity", "[reference][dropout]") {
  auto be = make_reference_backend();
  std::vector<float> x{1, -2, 3}, y(3), mask(3);
  be->dropout_forward(x.data(), y.data(), mask.data(), 3, 0.0f, 7);
  CHECK(y == x);
  CHECK(mask == std::vector<float>(3, 1.0f));
  CHECK_THROWS_AS(be->dropout_forward(x.data(), y.data(), mask.data(), 3, 1.0f, 7), dtrain::Error);
}

TEST_CASE("reference kernels reject bad descriptors", "[reference]") {
  auto be = make_reference_backend();
  ConvDesc c;
  c.c = 5, c.k = 4, c.groups = 2;
  CHECK_THROWS_AS(be->conv(c), dtrain::Error);
  c.c = 4, c.h = c.w = 2, c.kh = c.kw = 3;  // kernel larger than the input
  CHECK_THROWS_AS(be->conv(c), dtrain::Error);
  PoolDesc p;
  p.h = p.w = 4, p.kh = p.kw = 2, p.pad_h = 2;  // pad > kernel/2
  CHECK_THROWS_AS(be->pool(p), dtrain::Error);
}
