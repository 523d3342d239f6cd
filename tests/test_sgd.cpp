// tests/test_sgd.cpp — SGD update, weight-decay exclusions, LR schedules, scaling rule.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "core/sum_squares.hpp"
#include "layers/cpu/onednn.hpp"
#include "layers/cpu/reference.hpp"
#include "layers/sgd.hpp"

using namespace dtrain::layers;

TEST_CASE("SGD with momentum and weight decay matches hand arithmetic", "[sgd]") {
  auto be = make_reference_backend();
  // One range, p = 1, g = 0.5, wd = 0.1, momentum 0.9, lr 0.1.
  std::vector<ParamRange> ranges{{"w", 0, 1, false}};
  Sgd sgd(*be, {0.9f, 0.1f, true}, ranges, 1);
  float p = 1.0f, g = 0.5f;
  sgd.step(&p, &g, 0.1f);
  // g' = 0.5 + 0.1·1 = 0.6; v = 0.6; p = 1 − 0.06 = 0.94
  REQUIRE(p == Approx(0.94f).epsilon(1e-6));
  sgd.step(&p, &g, 0.1f);
  // g' = 0.5 + 0.094 = 0.594; v = 0.9·0.6 + 0.594 = 1.134; p = 0.94 − 0.1134 = 0.8266
  REQUIRE(p == Approx(0.8266f).epsilon(1e-5));
  REQUIRE(sgd.momentum_state()[0] == Approx(1.134f).epsilon(1e-5));
}

TEST_CASE("weight decay skips biases and BN parameters when asked", "[sgd]") {
  auto be = make_reference_backend();
  std::vector<ParamRange> ranges{{"w", 0, 2, false}, {"b", 2, 2, true}};
  Sgd sgd(*be, {0.0f, 1.0f, /*decay_bias_bn=*/false}, ranges, 4);
  float p[4] = {1, 1, 1, 1}, g[4] = {0, 0, 0, 0};
  sgd.step(p, g, 0.5f);
  REQUIRE(p[0] == Approx(0.5f));  // decayed: 1 − 0.5·(0 + 1·1)
  REQUIRE(p[1] == Approx(0.5f));
  REQUIRE(p[2] == 1.0f);  // bias: no decay, zero gradient
  REQUIRE(p[3] == 1.0f);
  // A partial range [1, 3) straddles both.
  Sgd sgd2(*be, {0.0f, 1.0f, false}, ranges, 4);
  float q[4] = {1, 1, 1, 1};
  sgd2.step(q, g, 0.5f, 1, 3);
  REQUIRE(q[0] == 1.0f);
  REQUIRE(q[1] == Approx(0.5f));
  REQUIRE(q[2] == 1.0f);
}

TEST_CASE("SGD out of place writes every element of its range, gaps between parameter ranges included", "[sgd]") {
  // Ranges [0, 2) decayed and [4, 6) not: [2, 4) and [6, 7) belong to no
  // range, so the update leaves them alone; out of place they must still be
  // the input generation's values, not whatever the out arena held.
  for (auto make : {make_reference_backend, make_cpu_backend}) {
    auto be = make();
    std::vector<ParamRange> ranges{{"w", 0, 2, false}, {"b", 4, 2, true}};
    Sgd sgd(*be, {0.9f, 0.1f, /*decay_bias_bn=*/false}, ranges, 7);
    std::vector<float> p_in{1, 2, 3, 4, 5, 6, 7}, m_in{0.5f, 0.25f, -1, -2, 0.125f, 1, -3};
    std::vector<float> g{0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f};
    std::vector<float> p_out(7, -99.0f), m_out(7, -99.0f);
    sgd.step_into(p_in.data(), m_in.data(), p_out.data(), m_out.data(), g.data(), 0.5f, 0, 7);
    // In place from the same values (this Sgd's own momentum set to m_in).
    std::vector<float> p = p_in;
    std::copy(m_in.begin(), m_in.end(), sgd.momentum_state());
    sgd.step(p.data(), g.data(), 0.5f);
    for (size_t i = 0; i < 7; ++i) {
      INFO("element " << i);
      CHECK(p_out[i] == p[i]);
      CHECK(m_out[i] == sgd.momentum_state()[i]);
    }
    CHECK(p_out[2] == 3.0f);  // a gap: the input's value
    CHECK(m_out[6] == -3.0f);
    CHECK(p_out[0] != 1.0f);  // updated
    // A sub-range starting and ending in gaps leaves the rest of out alone.
    std::vector<float> q_out(7, -99.0f), n_out(7, -99.0f);
    sgd.step_into(p_in.data(), m_in.data(), q_out.data(), n_out.data(), g.data(), 0.5f, 3, 7);
    CHECK(q_out[2] == -99.0f);
    CHECK(q_out[3] == 4.0f);
    CHECK(q_out[4] == p_out[4]);
    CHECK(n_out[6] == -3.0f);
  }
}

TEST_CASE("the cpu backend's SGD pass gives the reference backend's bits over unaligned ranges and thread shares",
          "[sgd]") {
  // Long enough for the threaded pass (2^15 floats and up); ranges that begin
  // and end off the 16-float vectors of the AVX-512 pass, two decays.
  if (!__builtin_cpu_supports("avx512f")) WARN("no AVX-512F here: the AVX-512 SGD loop is not exercised");
  const size_t n = 100003;
  std::vector<ParamRange> ranges{{"w", 0, 50001, false}, {"b", 50001, 49990, true}, {"w2", 99991, 12, false}};
  std::vector<float> p0(n), g(n);
  uint32_t s = 12345;
  auto next = [&s] {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<int32_t>(s >> 8) - (1 << 23)) / static_cast<float>(1 << 23);
  };
  for (size_t i = 0; i < n; ++i) {
    p0[i] = next();
    g[i] = next() * 1e-2f;
  }
  auto ref_be = make_reference_backend();
  auto cpu_be = make_cpu_backend();
  for (auto [begin, end] : {std::pair<size_t, size_t>{0, n}, {7, 99990}}) {
    INFO("range [" << begin << ", " << end << ")");
    Sgd ref(*ref_be, {0.9f, 1e-3f, /*decay_bias_bn=*/false}, ranges, n);
    Sgd cpu(*cpu_be, {0.9f, 1e-3f, false}, ranges, n);
    std::vector<float> pr = p0, pc = p0;
    for (int step = 0; step < 3; ++step) {
      ref.step(pr.data(), g.data(), 0.05f, begin, end);
      cpu.step(pc.data(), g.data(), 0.05f, begin, end);
    }
    size_t diff = 0;
    for (size_t i = 0; i < n; ++i)
      diff += (pr[i] != pc[i]) + (ref.momentum_state()[i] != cpu.momentum_state()[i]);
    CHECK(diff == 0);
    CHECK(pc[begin] != p0[begin]);  // updated
    CHECK(pc[end - 1] != p0[end - 1]);
    // Out of place (a speculating server's pass): the in-place bits.
    std::vector<float> po(n), mo(n);
    cpu.step_into(pc.data(), cpu.momentum_state(), po.data(), mo.data(), g.data(), 0.05f, begin, end);
    ref.step(pr.data(), g.data(), 0.05f, begin, end);
    diff = 0;
    for (size_t i = begin; i < end; ++i) diff += (po[i] != pr[i]) + (mo[i] != ref.momentum_state()[i]);
    CHECK(diff == 0);
  }
}

TEST_CASE("learning-rate schedules", "[sgd]") {
  LrSchedule s;
  s.base_lr = 0.1f;
  s.warmup_steps = 10;
  s.warmup_start = 0.1f;
  REQUIRE(s.at(0) == Approx(0.01f));
  REQUIRE(s.at(5) == Approx(0.1f * (0.1 + 0.9 * 0.5)));
  REQUIRE(s.at(10) == Approx(0.1f));
  s.kind = LrSchedule::Kind::step;
  s.warmup_steps = 0;
  s.step_size = 30;
  s.gamma = 0.1f;
  REQUIRE(s.at(29) == Approx(0.1f));
  REQUIRE(s.at(30) == Approx(0.01f));
  REQUIRE(s.at(65) == Approx(0.001f));
  s.kind = LrSchedule::Kind::cosine;
  s.total_steps = 100;
  REQUIRE(s.at(0) == Approx(0.1f));
  REQUIRE(s.at(50) == Approx(0.05f));
  REQUIRE(s.at(100) == Approx(0.0f).margin(1e-7));
  REQUIRE(s.at(25) == Approx(0.05 * (1 + std::cos(M_PI / 4))));
  REQUIRE_THROWS_AS(LrSchedule::parse_kind("linear"), dtrain::UsageError);
}

TEST_CASE("linear scaling rule", "[sgd]") {
  // Goyal et al.: lr 0.1 for batch 256 → 3.2 for batch 8192.
  REQUIRE(linear_scaled_lr(0.1f, 256, 8192) == Approx(3.2f));
  REQUIRE(linear_scaled_lr(0.01f, 64, 16) == Approx(0.0025f));
}

// The step schedule with milestones, against a plain loop that walks the
// steps and multiplies by gamma on reaching each milestone (warm-up first).
TEST_CASE("step schedule with milestones: gamma at each milestone, composed with warm-up", "[sgd]") {
  LrSchedule s;
  s.kind = LrSchedule::Kind::step;
  s.base_lr = 0.4f;
  s.gamma = 0.1f;
  s.warmup_steps = 50;  // Goyal et al.: 5 epochs of 10 steps
  s.warmup_start = 0.25f;
  s.milestones = {300, 600, 800};  // epochs 30, 60, 80
  s.step_size = 7;  // ignored while milestones are set
  double factor = 1.0;
  size_t next = 0;
  for (int64_t t = 0; t < 1000; ++t) {
    while (next < s.milestones.size() && t >= s.milestones[next]) {
      factor *= s.gamma;
      ++next;
    }
    const double want = t < s.warmup_steps
                            ? s.base_lr * (s.warmup_start + (1.0 - s.warmup_start) * double(t) / double(s.warmup_steps))
                            : s.base_lr * factor;
    INFO("step " << t);
    REQUIRE(s.at(t) == Approx(want).epsilon(1e-6));
  }
  CHECK(s.at(299) == Approx(0.4f));
  CHECK(s.at(300) == Approx(0.04f));
  CHECK(s.at(799) == Approx(0.004f));
  CHECK(s.at(800) == Approx(0.0004f));  // the fourth stage, which "every 300" misses
  // A milestone inside the warm-up shows from its end; equal milestones apply gamma twice.
  s.milestones = {20, 100, 100};
  CHECK(s.at(49) == Approx(0.4f * (0.25 + 0.75 * 49.0 / 50.0)));
  CHECK(s.at(50) == Approx(0.04f));
  CHECK(s.at(100) == Approx(0.0004f));
  // Without milestones the step size rules again.
  s.milestones.clear();
  s.warmup_steps = 0;
  CHECK(s.at(6) == Approx(0.4f));
  CHECK(s.at(7) == Approx(0.04f));
}

TEST_CASE("sum_of_squares: the double sum, the same bits at every thread count, non-finite on Inf or NaN",
          "[sgd]") {
  const size_t n = (size_t{1} << 18) + 13;  // many blocks and a ragged end
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * (1.0f + static_cast<float>(i % 7));
  long double want = 0;
  for (float v : x) want += static_cast<long double>(v) * v;
  const int restore = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  set_cpu_threads(1);
  const double one = sum_of_squares(x.data(), n);
  CHECK(one == Approx(static_cast<double>(want)).epsilon(1e-12));
  for (int t : {2, 3}) {
    set_cpu_threads(t);
    CHECK(sum_of_squares(x.data(), n) == one);  // bitwise
  }
  set_cpu_threads(restore);
  CHECK(sum_of_squares(x.data(), 5) == Approx(0.0 + x[1] * x[1] + x[2] * x[2] + x[3] * x[3] + x[4] * x[4]));
  CHECK(sum_of_squares(x.data(), 0) == 0.0);
  x[n / 2] = std::numeric_limits<float>::quiet_NaN();
  CHECK_FALSE(std::isfinite(sum_of_squares(x.data(), n)));
  x[n / 2] = std::numeric_limits<float>::infinity();
  CHECK_FALSE(std::isfinite(sum_of_squares(x.data(), n)));
}

TEST_CASE("core sum_squares: 32 lanes in a fixed order, add_and_sum_squares adds then sums the result, "
          "the vector and portable loops give the same bits", "[sgd]") {
  REQUIRE(dtrain::kSumSquaresLanes == 32);
  // The plain reference: lane i mod 32 in double, lanes added in order.
  auto reference = [](const std::vector<float>& v) {
    double lane[32] = {};
    for (size_t i = 0; i < v.size(); ++i) lane[i % 32] += static_cast<double>(v[i]) * v[i];
    double q = 0;
    for (double l : lane) q += l;
    return q;
  };
  // Sizes around whole rounds of the lanes, and 31 rounds with a ragged end.
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{31}, size_t{32}, size_t{33}, size_t{64}, size_t{1003}}) {
    CAPTURE(n);
    std::vector<float> g(n), other(n);
    for (size_t i = 0; i < n; ++i) {  // magnitudes over many binades: a changed order changes the bits
      g[i] = std::cos(0.11f * static_cast<float>(i)) * std::exp2(static_cast<float>(i % 23) - 11.0f);
      other[i] = std::sin(0.29f * static_cast<float>(i)) - 0.25f;
    }
    CHECK(dtrain::sum_squares(g.data(), n) == reference(g));  // bitwise
    CHECK(dtrain::detail::sum_squares_portable(g.data(), n) == reference(g));
    std::vector<float> sum(n);
    for (size_t i = 0; i < n; ++i) sum[i] = g[i] + other[i];
    std::vector<float> g2 = g;
    const double q = dtrain::add_and_sum_squares(g.data(), other.data(), n);
    CHECK(g == sum);
    CHECK(q == reference(sum));
    const double q2 = dtrain::detail::add_and_sum_squares_portable(g2.data(), other.data(), n);
    CHECK(g2 == sum);
    CHECK(q2 == reference(sum));
    // A non-finite element anywhere (vector rounds or the ragged end) makes the sum non-finite.
    for (size_t at : {size_t{0}, n / 2, n - 1})
      if (at < n) {
        std::vector<float> bad = sum;
        bad[at] = at % 2 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
        CHECK_FALSE(std::isfinite(dtrain::sum_squares(bad.data(), n)));
        CHECK_FALSE(std::isfinite(dtrain::detail::sum_squares_portable(bad.data(), n)));
        std::vector<float> a = bad, b = bad;  // the ps server's path: the addend holds it
        CHECK_FALSE(std::isfinite(dtrain::add_and_sum_squares(a.data(), bad.data(), n)));
        CHECK_FALSE(std::isfinite(dtrain::detail::add_and_sum_squares_portable(b.data(), bad.data(), n)));
      }
  }
}
