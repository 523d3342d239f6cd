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
#include <string>

#include "compare_util.hpp"
#include "layers/cpu/onednn.hpp"
#include "layers/cpu/onednn_internal.hpp"
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
  // LeNet's pool shape: non-overlapping windows run on dtrain's loops in the
  // producer's layout (no conversion, no oneDNN nChw8c on AVX2). Ties, a NaN
  // and padding channels: the first maximum of the window wins (a NaN over
  // any number), padding channels stay zero. Inputs go in and results come
  // out through the backend's conversions (tests/test_formats.cpp).
  auto cpu = make_cpu_backend(), ref = make_reference_backend();
  for (int b : {8, 16}) {
    for (int c : {6, 19}) {
      CAPTURE(b, c);
      PoolDesc d{2, c, 6, 5, 2, 2, 2, 2, 0, 0, PoolKind::max, true, {}};
      PoolDesc e = d;
      e.exec.any_format = true;
      e.exec.src = Format::blocked(b);
      auto kc = cpu->pool(e), kr = ref->pool(d);
      const Format f = Format::blocked(b);
      REQUIRE(kc->src_format() == f);
      REQUIRE(kc->dst_format() == f);
      REQUIRE(kc->impl() == "loops");
      const Shape xs(d.n, c, d.h, d.w), ys(d.n, c, d.out_h(), d.out_w());
      std::mt19937 rng(7);
      const size_t nx = size_t(xs.numel()), ny = size_t(ys.numel());
      Vec x = random_vec(nx, rng), dy = random_vec(ny, rng), yr(ny), dxr(nx);
      for (size_t i = 0; i < nx; i += 7) x[i] = x[i + 1 < nx ? i + 1 : i];  // ties
      x[3] = std::numeric_limits<float>::quiet_NaN();
      kr->forward(x.data(), yr.data());
      kr->backward(x.data(), yr.data(), dy.data(), dxr.data());

      Vec xb(f.elements(xs)), dyb(f.elements(ys)), yb(f.elements(ys), -1.0f), dxb(f.elements(xs), -1.0f);
      Tensor txb = Tensor::view(xb.data(), xs, f), tdyb = Tensor::view(dyb.data(), ys, f);
      cpu->convert(Tensor::view(x.data(), xs), txb);
      cpu->convert(Tensor::view(dy.data(), ys), tdyb);
      kc->forward(xb.data(), yb.data());
      kc->backward(xb.data(), yb.data(), dyb.data(), dxb.data());
      Vec y(ny), dx(nx);
      Tensor ty = Tensor::view(y.data(), ys), tdx = Tensor::view(dx.data(), xs);
      cpu->convert(Tensor::view(yb.data(), ys, f), ty);
      cpu->convert(Tensor::view(dxb.data(), xs, f), tdx);
      auto same = [](float a, float r) { return std::memcmp(&a, &r, sizeof a) == 0 || (a != a && r != r); };
      size_t wrong = 0;
      for (size_t i = 0; i < ny; ++i) wrong += !same(y[i], yr[i]);
      for (size_t i = 0; i < nx; ++i) wrong += !same(dx[i], dxr[i]);
      CHECK(wrong == 0);
      // The padding channels of y and dx: lanes c % b ≥ c of the last block.
      auto padding_nonzero = [&](const Vec& v, const Shape& s) {
        const int64_t blocks = (c + b - 1) / b, pix = s.h() * s.w();
        size_t bad = 0;
        for (int64_t n = 0; n < s.n(); ++n)
          for (int64_t ch = c; ch < blocks * b; ++ch)
            for (int64_t p = 0; p < pix; ++p) bad += v[size_t(((n * blocks + ch / b) * pix + p) * b + ch % b)] != 0.0f;
        return bad;
      };
      CHECK(padding_nonzero(yb, ys) == 0);
      CHECK(padding_nonzero(dxb, xs) == 0);
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
    CHECK(onednn::is_jit_impl(k->impl().c_str()));
    CHECK(k->src_format() == k->dst_format());
  }
}

TEST_CASE("cpu backend linear: wide layers run backward on the inner product, small ones on the matmul",
          "[onednn][linear]") {
  // layers/cpu/onednn_linear.cpp, backward_on_inner_product: ≥ 2^20 weights
  // in f32 (AlexNet's fc6 backward 37.7 → 22.0 ms). Both paths equal the
  // reference: the backend ops table ("linear N=4 IN=1031 OUT=1024").
  auto cpu = make_cpu_backend();
  const auto wide = cpu->linear(LinearDesc{4, 1031, 1024, true, {}});
  const auto just_under = cpu->linear(LinearDesc{4, 1023, 1024, true, {}});
  const auto lenet_fc = cpu->linear(LinearDesc{64, 400, 120, true, {}});
  CAPTURE(wide->impl(), just_under->impl(), lenet_fc->impl());
  CHECK(wide->impl().find("; backward on inner product ") != std::string::npos);
  CHECK(just_under->impl().find("; backward on matmul ") != std::string::npos);
  CHECK(lenet_fc->impl().find("; backward on matmul ") != std::string::npos);
  CHECK(wide->impl().rfind("matmul ", 0) == 0);
  for (const auto* k : {&wide, &just_under, &lenet_fc}) CHECK((*k)->impl().find("ref") == std::string::npos);
}

TEST_CASE("bf16 that measures slower than fp32 is named with both numbers", "[onednn][bf16]") {
  // An Emerald Rapids Xeon without AMX (2026-12-06): bf16 153 GFLOP/s, f32 244.
  const std::string w = bf16_slower_warning(153.4, 244.5);
  CAPTURE(w);
  CHECK(w.find("153 GFLOP/s against 244 in fp32 (0.63x)") != std::string::npos);
  CHECK(w.find("--precision fp32") != std::string::npos);
  CHECK(bf16_slower_warning(843, 429).empty());        // Cooper Lake / Zen 4 class: twice as fast
  CHECK(bf16_slower_warning(0.9 * 250, 250).empty());  // within 10%: not worth a word
  CHECK_FALSE(bf16_slower_warning(0.89 * 250, 250).empty());
  CHECK(bf16_slower_warning(std::numeric_limits<double>::quiet_NaN(), 250).empty());  // no measurement
  CHECK(bf16_slower_warning(100, 0).empty());
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
