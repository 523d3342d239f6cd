// tests/test_onednn.cpp — what the "cpu" backend (oneDNN + OpenBLAS) promises
// beyond the backend contract: backward without a forward first (the conv
// recomputes nothing it has not got; max pooling recomputes the argmax), the
// unbiased running variance on a hand-computed case, its identity. Its kernels
// against the reference, forward and backward, are the table of
// tests/backend_ops.cpp ("backend ops: cpu …").
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "compare_util.hpp"
#include "layers/cpu/onednn.hpp"
#include "layers/cpu/reference.hpp"

namespace dtrain::layers {
namespace {

using ::dtrain::test::random_vec;
using ::dtrain::test::Vec;

constexpr double kTol = 1e-4;  // tests/backend_ops.hpp: Tol::kernel

}  // namespace

TEST_CASE("cpu backend conv backward before any forward matches reference", "[onednn]") {
  auto cpu = make_cpu_backend(), ref = make_reference_backend();
  ConvDesc d{3, 16, 7, 7, 16, 3, 3, 1, 1, 1, 1, 1, true, {}};
  auto kc = cpu->conv(d), kr = ref->conv(d);
  std::mt19937 rng(42);
  const size_t xn = 3 * 16 * 49, wn = 16 * 16 * 9, yn = 3 * 16 * 49;
  Vec x = random_vec(xn, rng), w = random_vec(wn, rng), dy = random_vec(yn, rng);
  Vec dxc(xn), dxr(xn), dwc(wn), dwr(wn), dbc(16), dbr(16);
  kc->backward(x.data(), w.data(), dy.data(), dxc.data(), dwc.data(), dbc.data());
  kr->backward(x.data(), w.data(), dy.data(), dxr.data(), dwr.data(), dbr.data());
  CHECK_CLOSE(dxc, dxr, kTol);
  CHECK_CLOSE(dwc, dwr, kTol);
  CHECK_CLOSE(dbc, dbr, kTol);
}

TEST_CASE("cpu backend max-pool backward without a forward recomputes the argmax", "[onednn]") {
  auto cpu = make_cpu_backend(), ref = make_reference_backend();
  PoolDesc d{3, 5, 7, 7, 3, 3, 2, 2, 1, 1, PoolKind::max, true, {}};
  auto kc = cpu->pool(d), kr = ref->pool(d);
  std::mt19937 rng(3);
  const size_t nx = size_t(d.n) * d.c * d.h * d.w, ny = size_t(d.n) * d.c * d.out_h() * d.out_w();
  Vec x = random_vec(nx, rng), dy = random_vec(ny, rng), yr(ny), dxc(nx), dxr(nx);
  kr->forward(x.data(), yr.data());
  kr->backward(x.data(), yr.data(), dy.data(), dxr.data());
  kc->backward(x.data(), yr.data(), dy.data(), dxc.data());
  CHECK_CLOSE(dxc, dxr, kTol);
}

TEST_CASE("cpu backend 2x2/2 max pooling keeps a blocked producer's format and equals the reference bitwise",
          "[onednn][pool][format]") {
  // LeNet's pools: non-overlapping windows run on loops in the producer's
  // layout (no conversion, no oneDNN nChw8c on AVX2). Ties, a NaN and padding
  // channels: the first maximum of the window wins (a NaN over any number),
  // padding channels stay zero.
  auto cpu = make_cpu_backend(), ref = make_reference_backend();
  for (int b : {8, 16}) {
    for (int c : {6, 19}) {
      CAPTURE(b, c);
      PoolDesc d{2, c, 6, 5, 2, 2, 2, 2, 0, 0, PoolKind::max, true, {}};
      PoolDesc e = d;
      e.exec.any_format = true;
      e.exec.src = Format::blocked(b);
      auto kc = cpu->pool(e), kr = ref->pool(d);
      REQUIRE(kc->src_format() == Format::blocked(b));
      REQUIRE(kc->dst_format() == Format::blocked(b));
      REQUIRE(kc->impl() == "loops");
      const int cb = (c + b - 1) / b, oh = d.out_h(), ow = d.out_w();
      auto at = [&](int n, int ch, int h, int w, int hh, int ww) {  // nChw{b}c offset
        return ((size_t(n * cb + ch / b) * hh + h) * ww + w) * b + ch % b;
      };
      std::mt19937 rng(7);
      const size_t nx = size_t(d.n) * c * d.h * d.w, ny = size_t(d.n) * c * oh * ow;
      Vec x = random_vec(nx, rng), dy = random_vec(ny, rng), yr(ny), dxr(nx);
      for (size_t i = 0; i < nx; i += 7) x[i] = x[i + 1 < nx ? i + 1 : i];  // ties
      x[3] = std::numeric_limits<float>::quiet_NaN();
      kr->forward(x.data(), yr.data());
      kr->backward(x.data(), yr.data(), dy.data(), dxr.data());
      Vec xb(size_t(d.n) * cb * b * d.h * d.w, 0.0f), dyb(size_t(d.n) * cb * b * oh * ow, 0.0f);
      for (int n = 0; n < d.n; ++n)
        for (int ch = 0; ch < c; ++ch) {
          for (int h = 0; h < d.h; ++h)
            for (int w = 0; w < d.w; ++w)
              xb[at(n, ch, h, w, d.h, d.w)] = x[((size_t(n) * c + ch) * d.h + h) * d.w + w];
          for (int h = 0; h < oh; ++h)
            for (int w = 0; w < ow; ++w)
              dyb[at(n, ch, h, w, oh, ow)] = dy[((size_t(n) * c + ch) * oh + h) * ow + w];
        }
      Vec yb(dyb.size(), -1.0f), dxb(xb.size(), -1.0f);
      kc->forward(xb.data(), yb.data());
      kc->backward(xb.data(), yb.data(), dyb.data(), dxb.data());
      auto same = [](float a, float r) { return std::memcmp(&a, &r, sizeof a) == 0 || (a != a && r != r); };
      size_t wrong = 0;
      for (int n = 0; n < d.n; ++n)
        for (int ch = 0; ch < cb * b; ++ch) {
          for (int h = 0; h < oh; ++h)
            for (int w = 0; w < ow; ++w) {
              const float got = yb[at(n, ch, h, w, oh, ow)];
              wrong += ch < c ? !same(got, yr[((size_t(n) * c + ch) * oh + h) * ow + w]) : got != 0.0f;
            }
          for (int h = 0; h < d.h; ++h)
            for (int w = 0; w < d.w; ++w) {
              const float got = dxb[at(n, ch, h, w, d.h, d.w)];
              wrong += ch < c ? !same(got, dxr[((size_t(n) * c + ch) * d.h + h) * d.w + w]) : got != 0.0f;
            }
        }
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("cpu backend overlapping max pooling runs a JIT kernel whatever layout its producer writes",
          "[onednn][pool][format]") {
  // AlexNet's 3×3/2 pools: on a CPU whose oneDNN has no JIT kernel for plain
  // NCHW (AVX2) the kernel picks a blocked layout rather than the scalar
  // simple_nchw (27.6 ms against 3.8 for AlexNet's pool1, bench/README.md).
  // oneDNN 2.6 has JIT pooling on x86-64 from SSE4.1 up, the CPUs dtrain's
  // cpu backend is built for.
  auto cpu = make_cpu_backend();
  for (int b : {1, 8, 16}) {
    CAPTURE(b);
    PoolDesc d{4, 64, 27, 27, 3, 3, 2, 2, 0, 0, PoolKind::max, true, {}};
    d.exec.any_format = true;
    d.exec.src = Format::blocked(b);
    auto k = cpu->pool(d);
    CAPTURE(k->impl(), k->src_format().str());
    CHECK(k->impl().rfind("jit", 0) == 0);
    CHECK(k->src_format() == k->dst_format());
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

TEST_CASE("cpu backend identity", "[onednn]") {
  auto cpu = make_cpu_backend();
  CHECK(cpu->name() == "cpu");
  CHECK(cpu->device() == Device::cpu);
  auto p = cpu->allocate(1000);
  CHECK(reinterpret_cast<uintptr_t>(p.get()) % 64 == 0);
  CHECK(p.get()[999] == 0.0f);
}

}  // namespace dtrain::layers
