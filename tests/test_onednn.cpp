// tests/test_onednn.cpp — the "cpu" backend (oneDNN + OpenBLAS) against the
// plain-loop reference backend, kernel by kernel, forward and backward, on
// random data and odd shapes (N=3, C=5, 7×7, stride 2, padding 1, groups 2).
//
// Every case runs twice in a row on the same kernel objects and buffers with
// fresh data (the training pattern: forward then backward, same pointers),
// to catch stale cached state (reordered weights, workspaces, statistics).
//
// Tolerance: max_i |cpu_i − ref_i| / (1 + |ref_i|) ≤ 1e-4 for the oneDNN and
// BLAS kernels (float sums in another order than the reference's double
// sums; inputs are U(−1, 1)); ≤ 1e-5 for elementwise arithmetic; bit for bit
// for ReLU, dropout masks, copy, fill, add and accumulate.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "compare_util.hpp"
#include "layers/cpu/onednn.hpp"
#include "layers/cpu/reference.hpp"

namespace dtrain::layers {
namespace {

constexpr double kTol = 1e-4;

using ::dtrain::test::fill_random;
using ::dtrain::test::random_vec;
using ::dtrain::test::rel_err;
using ::dtrain::test::Vec;

struct Backends {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  std::unique_ptr<Backend> ref = make_reference_backend();
};

size_t conv_out(const ConvDesc& d) { return size_t(d.n) * d.k * d.out_h() * d.out_w(); }

void check_conv(const ConvDesc& d, bool want_dx, bool backward_first = false) {
  Backends b;
  auto kc = b.cpu->conv(d);
  auto kr = b.ref->conv(d);
  std::mt19937 rng(42);
  Vec x(size_t(d.n) * d.c * d.h * d.w), w(size_t(d.k) * (d.c / d.groups) * d.kh * d.kw),
      bias(d.k), dy(conv_out(d));
  Vec yc(conv_out(d)), yr(conv_out(d)), dxc(x.size()), dxr(x.size()), dwc(w.size()),
      dwr(w.size()), dbc(d.k), dbr(d.k);
  const float* bp = d.bias ? bias.data() : nullptr;
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    fill_random(x, rng);
    fill_random(w, rng);
    fill_random(bias, rng);
    fill_random(dy, rng);
    if (!(backward_first && round == 0)) {
      kc->forward(x.data(), w.data(), bp, yc.data());
      kr->forward(x.data(), w.data(), bp, yr.data());
      CHECK_CLOSE(yc, yr, kTol);
    }
    kc->backward(x.data(), w.data(), dy.data(), want_dx ? dxc.data() : nullptr, dwc.data(),
                 d.bias ? dbc.data() : nullptr);
    kr->backward(x.data(), w.data(), dy.data(), want_dx ? dxr.data() : nullptr, dwr.data(),
                 d.bias ? dbr.data() : nullptr);
    if (want_dx) CHECK_CLOSE(dxc, dxr, kTol);
    CHECK_CLOSE(dwc, dwr, kTol);
    if (d.bias) CHECK_CLOSE(dbc, dbr, kTol);
  }
}

ConvDesc conv_desc(int n, int c, int hw, int k, int ks, int stride, int pad, int groups,
                   bool bias) {
  ConvDesc d;
  d.n = n, d.c = c, d.h = hw, d.w = hw, d.k = k, d.kh = ks, d.kw = ks;
  d.stride_h = d.stride_w = stride, d.pad_h = d.pad_w = pad, d.groups = groups, d.bias = bias;
  return d;
}

}  // namespace

TEST_CASE("cpu backend conv matches reference", "[onednn]") {
  SECTION("N=3 C=5 7x7 K=4 3x3 stride 2 pad 1") { check_conv(conv_desc(3, 5, 7, 4, 3, 2, 1, 1, true), true); }
  SECTION("groups 2, C=4 K=6") { check_conv(conv_desc(3, 4, 7, 6, 3, 1, 1, 2, true), true); }
  SECTION("groups 2, C=6 K=4, stride 2, no bias") { check_conv(conv_desc(3, 6, 7, 4, 3, 2, 1, 2, false), true); }
  SECTION("blocked path: C=16 K=32 5x5 pad 2, groups 2") { check_conv(conv_desc(2, 16, 9, 32, 5, 1, 2, 2, true), true); }
  SECTION("blocked path: C=32 K=16 3x3 odd 11x11") { check_conv(conv_desc(3, 32, 11, 16, 3, 1, 1, 1, true), true); }
  SECTION("1x1 (plain gemm path)") { check_conv(conv_desc(3, 16, 7, 24, 1, 1, 0, 1, true), true); }
  SECTION("1x1 stride 2") { check_conv(conv_desc(3, 8, 7, 8, 1, 2, 0, 1, false), true); }
  SECTION("first layer: C=3, dx not computed") { check_conv(conv_desc(3, 3, 15, 8, 5, 2, 2, 1, true), false); }
  SECTION("floor mode drops the last column: 8x8, 3x3, stride 2, pad 0") { check_conv(conv_desc(2, 5, 8, 4, 3, 2, 0, 1, true), true); }
  SECTION("backward before any forward") { check_conv(conv_desc(3, 16, 7, 16, 3, 1, 1, 1, true), true, true); }
}

namespace {

void check_pool(const PoolDesc& d) {
  Backends b;
  auto kc = b.cpu->pool(d);
  auto kr = b.ref->pool(d);
  std::mt19937 rng(7);
  const size_t nx = size_t(d.n) * d.c * d.h * d.w, ny = size_t(d.n) * d.c * d.out_h() * d.out_w();
  Vec x(nx), dy(ny), yc(ny), yr(ny), dxc(nx), dxr(nx);
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    fill_random(x, rng);
    fill_random(dy, rng);
    kc->forward(x.data(), yc.data());
    kr->forward(x.data(), yr.data());
    CHECK_CLOSE(yc, yr, kTol);
    kc->backward(x.data(), yc.data(), dy.data(), dxc.data());
    kr->backward(x.data(), yr.data(), dy.data(), dxr.data());
    CHECK_CLOSE(dxc, dxr, kTol);
  }
}

PoolDesc pool_desc(PoolKind kind, int k, int stride, int pad, bool include_pad = true) {
  PoolDesc d;
  d.n = 3, d.c = 5, d.h = 7, d.w = 7, d.kh = d.kw = k, d.stride_h = d.stride_w = stride;
  d.pad_h = d.pad_w = pad, d.kind = kind, d.avg_include_pad = include_pad;
  return d;
}

}  // namespace

TEST_CASE("cpu backend pooling matches reference", "[onednn]") {
  SECTION("max 3x3 s2 p1") { check_pool(pool_desc(PoolKind::max, 3, 2, 1)); }
  SECTION("max 2x2 s2 p0 (floor drops a row)") { check_pool(pool_desc(PoolKind::max, 2, 2, 0)); }
  SECTION("max 3x3 s2 p0 (AlexNet)") { check_pool(pool_desc(PoolKind::max, 3, 2, 0)); }
  SECTION("avg 3x3 s2 p1 include pad") { check_pool(pool_desc(PoolKind::avg, 3, 2, 1, true)); }
  SECTION("avg 3x3 s2 p1 exclude pad") { check_pool(pool_desc(PoolKind::avg, 3, 2, 1, false)); }
  SECTION("avg 2x2 s2 p0") { check_pool(pool_desc(PoolKind::avg, 2, 2, 0)); }
  SECTION("global avg 7x7") { check_pool(pool_desc(PoolKind::avg, 7, 1, 0)); }
}

TEST_CASE("cpu backend max-pool backward without a forward recomputes the argmax", "[onednn]") {
  Backends b;
  PoolDesc d = pool_desc(PoolKind::max, 3, 2, 1);
  auto kc = b.cpu->pool(d);
  auto kr = b.ref->pool(d);
  std::mt19937 rng(3);
  const size_t nx = size_t(d.n) * d.c * d.h * d.w, ny = size_t(d.n) * d.c * d.out_h() * d.out_w();
  Vec x = random_vec(nx, rng), dy = random_vec(ny, rng), yr(ny), dxc(nx), dxr(nx);
  kr->forward(x.data(), yr.data());
  kr->backward(x.data(), yr.data(), dy.data(), dxr.data());
  kc->backward(x.data(), yr.data(), dy.data(), dxc.data());
  CHECK_CLOSE(dxc, dxr, kTol);
}

namespace {

void check_lrn(const LrnDesc& d) {
  Backends b;
  auto kc = b.cpu->lrn(d);
  auto kr = b.ref->lrn(d);
  std::mt19937 rng(11);
  const size_t n = size_t(d.n) * d.c * d.h * d.w;
  Vec x(n), dy(n), yc(n), yr(n), dxc(n), dxr(n);
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    fill_random(x, rng, -2.0f, 2.0f);
    fill_random(dy, rng);
    kc->forward(x.data(), yc.data());
    kr->forward(x.data(), yr.data());
    CHECK_CLOSE(yc, yr, kTol);
    kc->backward(x.data(), yc.data(), dy.data(), dxc.data());
    kr->backward(x.data(), yr.data(), dy.data(), dxr.data());
    CHECK_CLOSE(dxc, dxr, kTol);
  }
}

LrnDesc lrn_desc(int c, int size) {
  LrnDesc d;
  d.n = 3, d.c = c, d.h = 7, d.w = 7, d.size = size;
  d.alpha = 0.5f, d.beta = 0.75f, d.k = 2.0f;  // strong enough to matter at |x| ~ 1
  return d;
}

}  // namespace

TEST_CASE("cpu backend LRN matches reference", "[onednn]") {
  SECTION("size 5, C=5") { check_lrn(lrn_desc(5, 5)); }
  SECTION("size 3, C=5") { check_lrn(lrn_desc(5, 3)); }
  SECTION("size 5, C=20 (two channel blocks)") { check_lrn(lrn_desc(20, 5)); }
  SECTION("size 5, C=32") { check_lrn(lrn_desc(32, 5)); }
  SECTION("size 3, C=32") { check_lrn(lrn_desc(32, 3)); }
  SECTION("size 4 (asymmetric window), C=9") { check_lrn(lrn_desc(9, 4)); }
  SECTION("AlexNet constants") {
    LrnDesc d = lrn_desc(16, 5);
    d.alpha = 1e-4f, d.beta = 0.75f, d.k = 1.0f;
    check_lrn(d);
  }
}

TEST_CASE("cpu backend batch norm matches reference", "[onednn]") {
  for (auto [n, c, hw] : {std::tuple{3, 5, 7}, std::tuple{4, 16, 5}, std::tuple{8, 3, 1}}) {
    DYNAMIC_SECTION("N=" << n << " C=" << c << " HW=" << hw) {
      Backends b;
      BatchNormDesc d;
      d.n = n, d.c = c, d.h = hw, d.w = hw, d.eps = 1e-5f, d.momentum = 0.1f;
      auto kc = b.cpu->batch_norm(d);
      auto kr = b.ref->batch_norm(d);
      std::mt19937 rng(5);
      const size_t sz = size_t(n) * c * hw * hw;
      Vec x(sz), dy(sz), yc(sz), yr(sz), dxc(sz), dxr(sz), gamma(c), beta(c);
      Vec rmc(c, 0.0f), rvc(c, 1.0f), rmr(c, 0.0f), rvr(c, 1.0f);
      Vec dgc(c), dgr(c), dbc(c), dbr(c);
      for (int round = 0; round < 2; ++round) {
        INFO("round " << round);
        fill_random(x, rng, -1.0f, 3.0f);
        fill_random(dy, rng);
        fill_random(gamma, rng, 0.5f, 1.5f);
        fill_random(beta, rng);
        kc->forward_train(x.data(), gamma.data(), beta.data(), yc.data(), rmc.data(), rvc.data());
        kr->forward_train(x.data(), gamma.data(), beta.data(), yr.data(), rmr.data(), rvr.data());
        CHECK_CLOSE(yc, yr, kTol);
        CHECK_CLOSE(rmc, rmr, kTol);
        CHECK_CLOSE(rvc, rvr, kTol);  // unbiased running variance
        // Inference between forward_train and backward must not disturb the saved stats.
        Vec ic(sz), ir(sz);
        kc->forward_infer(x.data(), gamma.data(), beta.data(), rmc.data(), rvc.data(), ic.data());
        kr->forward_infer(x.data(), gamma.data(), beta.data(), rmr.data(), rvr.data(), ir.data());
        CHECK_CLOSE(ic, ir, kTol);
        const bool want_dx = round == 0;
        kc->backward(x.data(), dy.data(), gamma.data(), want_dx ? dxc.data() : nullptr, dgc.data(),
                     dbc.data());
        kr->backward(x.data(), dy.data(), gamma.data(), want_dx ? dxr.data() : nullptr, dgr.data(),
                     dbr.data());
        if (want_dx) CHECK_CLOSE(dxc, dxr, kTol);
        CHECK_CLOSE(dgc, dgr, kTol);
        CHECK_CLOSE(dbc, dbr, kTol);
      }
    }
  }
}

TEST_CASE("cpu backend batch norm running variance is unbiased", "[onednn]") {
  auto cpu = make_cpu_backend();
  BatchNormDesc d;
  d.n = 2, d.c = 1, d.h = 1, d.w = 2, d.momentum = 1.0f;  // running = batch statistics
  auto k = cpu->batch_norm(d);
  Vec x{1.0f, 2.0f, 3.0f, 6.0f}, g{1.0f}, bt{0.0f}, y(4), rm{0.0f}, rv{0.0f};
  k->forward_train(x.data(), g.data(), bt.data(), y.data(), rm.data(), rv.data());
  CHECK(rm[0] == Approx(3.0f));
  CHECK(rv[0] == Approx(14.0f / 3.0f));  // Σ(x − 3)² = 14 over M − 1 = 3
}

TEST_CASE("cpu backend linear matches reference", "[onednn]") {
  for (bool bias : {true, false}) {
    DYNAMIC_SECTION("bias " << bias) {
      Backends b;
      LinearDesc d;
      d.n = 3, d.in = 7, d.out = 5, d.bias = bias;
      auto kc = b.cpu->linear(d);
      auto kr = b.ref->linear(d);
      std::mt19937 rng(9);
      Vec x(21), w(35), bv(5), dy(15), yc(15), yr(15), dxc(21), dxr(21), dwc(35), dwr(35),
          dbc(5), dbr(5);
      for (int round = 0; round < 2; ++round) {
        INFO("round " << round);
        for (Vec* v : {&x, &w, &bv, &dy}) fill_random(*v, rng);
        const float* bp = bias ? bv.data() : nullptr;
        kc->forward(x.data(), w.data(), bp, yc.data());
        kr->forward(x.data(), w.data(), bp, yr.data());
        CHECK_CLOSE(yc, yr, kTol);
        float* dxp_c = round == 0 ? dxc.data() : nullptr;
        float* dxp_r = round == 0 ? dxr.data() : nullptr;
        kc->backward(x.data(), w.data(), dy.data(), dxp_c, dwc.data(), bias ? dbc.data() : nullptr);
        kr->backward(x.data(), w.data(), dy.data(), dxp_r, dwr.data(), bias ? dbr.data() : nullptr);
        if (round == 0) CHECK_CLOSE(dxc, dxr, kTol);
        CHECK_CLOSE(dwc, dwr, kTol);
        if (bias) CHECK_CLOSE(dbc, dbr, kTol);
      }
    }
  }
}

TEST_CASE("cpu backend elementwise functions match reference", "[onednn]") {
  Backends b;
  // 100003 crosses the OpenMP threshold; 37 stays serial.
  for (size_t n : {size_t(37), size_t(100003)}) {
    DYNAMIC_SECTION("count " << n) {
      std::mt19937 rng(1);
      Vec x = random_vec(n, rng), y0 = random_vec(n, rng), dy = random_vec(n, rng);
      Vec c1(n), r1(n), c2(n), r2(n), c3(n), r3(n);

      b.cpu->relu_forward(x.data(), c1.data(), n);
      b.ref->relu_forward(x.data(), r1.data(), n);
      CHECK(c1 == r1);
      b.cpu->relu_backward(c1.data(), dy.data(), c2.data(), n);
      b.ref->relu_backward(r1.data(), dy.data(), r2.data(), n);
      CHECK(c2 == r2);

      b.cpu->add(x.data(), y0.data(), c1.data(), n);
      b.ref->add(x.data(), y0.data(), r1.data(), n);
      CHECK(c1 == r1);
      b.cpu->accumulate(x.data(), c1.data(), n);
      b.ref->accumulate(x.data(), r1.data(), n);
      CHECK(c1 == r1);

      b.cpu->copy(x.data(), c1.data(), n);
      CHECK(c1 == x);
      b.cpu->fill(c1.data(), n, 0.25f);
      CHECK(c1 == Vec(n, 0.25f));

      for (float p : {0.0f, 0.5f, 0.9f}) {
        INFO("dropout p " << p);
        b.cpu->dropout_forward(x.data(), c1.data(), c2.data(), n, p, 1234);
        b.ref->dropout_forward(x.data(), r1.data(), r2.data(), n, p, 1234);
        CHECK(c2 == r2);  // masks bit for bit
        CHECK(c1 == r1);
        b.cpu->dropout_backward(c2.data(), dy.data(), c3.data(), n);
        b.ref->dropout_backward(r2.data(), dy.data(), r3.data(), n);
        CHECK(c3 == r3);
      }

      Vec pc = x, pr = x, mc = y0, mr = y0;
      for (int step = 0; step < 2; ++step) {
        b.cpu->sgd_update(pc.data(), dy.data(), mc.data(), n, 0.1f, 0.9f, 1e-4f);
        b.ref->sgd_update(pr.data(), dy.data(), mr.data(), n, 0.1f, 0.9f, 1e-4f);
      }
      CHECK_CLOSE(pc, pr, 1e-5);
      CHECK_CLOSE(mc, mr, 1e-5);
    }
  }
}

TEST_CASE("cpu backend softmax cross-entropy matches reference", "[onednn]") {
  Backends b;
  for (auto [n, k] : {std::pair{3, 5}, std::pair{64, 10}, std::pair{40, 1000}}) {
    DYNAMIC_SECTION("N=" << n << " K=" << k) {
      std::mt19937 rng(2);
      Vec logits = random_vec(size_t(n) * k, rng, -8.0f, 8.0f);
      std::vector<int32_t> labels(n);
      std::uniform_int_distribution<int32_t> lab(0, k - 1);
      for (auto& l : labels) l = lab(rng);
      labels[0] = 0;
      logits[0] = 100.0f;  // one certainly-correct sample
      Vec pc(logits.size()), pr(logits.size()), dc(logits.size()), dr(logits.size());
      int64_t cc = -1, cr = -1;
      double lc = b.cpu->softmax_xent_forward(logits.data(), labels.data(), n, k, pc.data(), &cc);
      double lr = b.ref->softmax_xent_forward(logits.data(), labels.data(), n, k, pr.data(), &cr);
      CHECK(lc == Approx(lr).epsilon(1e-5));
      CHECK(cc == cr);
      CHECK_CLOSE(pc, pr, 1e-5);
      b.cpu->softmax_xent_backward(pc.data(), labels.data(), n, k, 1.0f / n, dc.data());
      b.ref->softmax_xent_backward(pr.data(), labels.data(), n, k, 1.0f / n, dr.data());
      CHECK_CLOSE(dc, dr, 1e-5);
    }
  }
}

TEST_CASE("cpu backend identity", "[onednn]") {
  auto cpu = make_cpu_backend();
  CHECK(cpu->name() == "cpu");
  CHECK(cpu->device() == Device::cpu);
  auto p = cpu->allocate(1000);
  CHECK(reinterpret_cast<uintptr_t>(p.get()) % 64 == 0);
  CHECK(p.get()[999] == 0.0f);
}

}  // namespace dtrain::layers
