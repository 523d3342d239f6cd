// tests/test_sampler.cpp — epoch permutations and shards (io::Sampler).
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "core/error.hpp"
#include "io/batch.hpp"
#include "io/sampler.hpp"

using dtrain::io::Sampler;

TEST_CASE("permutation is a pure function of (seed, epoch)", "[sampler]") {
  Sampler a(1000, 1, 0, 10, 7), b(1000, 1, 0, 10, 7), c(1000, 1, 0, 10, 8);
  REQUIRE(a.permutation(3) == b.permutation(3));
  REQUIRE(a.permutation(3) != a.permutation(4));
  REQUIRE(a.permutation(3) != c.permutation(3));
  auto p = a.permutation(0);
  std::sort(p.begin(), p.end());
  for (int64_t i = 0; i < 1000; ++i) REQUIRE(p[static_cast<size_t>(i)] == i);
}

TEST_CASE("workers take disjoint shards and equal step counts", "[sampler]") {
  // 1001 samples, 4 workers, minibatch 25: 10 steps each, remainder 1.
  std::vector<Sampler> s;
  for (int r = 0; r < 4; ++r) s.emplace_back(1001, 4, r, 25, 3);
  for (auto& w : s) REQUIRE(w.steps_per_epoch() == 10);
  REQUIRE(s[0].remainder() == 1);
  std::set<int64_t> seen;
  for (int64_t step = 0; step < 10; ++step)
    for (auto& w : s)
      for (int64_t i : w.batch(2, step)) REQUIRE(seen.insert(i).second);
  REQUIRE(seen.size() == 1000);
  // The 1-process run with minibatch 4·25 sees the same global batches.
  Sampler one(1001, 1, 0, 100, 3);
  for (int64_t step = 0; step < 10; ++step) {
    std::vector<int64_t> global;
    for (auto& w : s) {
      auto b = w.batch(2, step);
      global.insert(global.end(), b.begin(), b.end());
    }
    REQUIRE(global == one.batch(2, step));
  }
  REQUIRE_THROWS_AS(Sampler(99, 4, 0, 25, 1), dtrain::UsageError);
}

TEST_CASE("evaluation shards cover every sample once", "[sampler]") {
  // 10 samples over 3 ranks.
  int64_t total = 0, expect_begin = 0;
  for (int r = 0; r < 3; ++r) {
    auto [b, e] = dtrain::io::eval_shard(10, 3, r);
    REQUIRE(b == expect_begin);
    total += e - b;
    expect_begin = e;
  }
  REQUIRE(total == 10);
}

TEST_CASE("uint8 HWC images become normalised NCHW floats", "[sampler]") {
  // 1 image 1×2, 2 channels: pixels (c0,c1) = (0,255), (51,102).
  uint8_t img[4] = {0, 255, 51, 102};
  float out[4];
  dtrain::io::normalize_to_nchw(img, 1, 1, 2, 2, {0.5f, 0.0f}, {0.5f, 1.0f}, out);
  CHECK(out[0] == Approx(-1.0f));           // (0 − 0.5)/0.5
  CHECK(out[1] == Approx((0.2f - 0.5f) / 0.5f));
  CHECK(out[2] == Approx(1.0f));            // 255/255
  CHECK(out[3] == Approx(0.4f));
  REQUIRE_THROWS_AS(dtrain::io::normalize_to_nchw(img, 1, 1, 2, 2, {0.5f}, {}, out), dtrain::Error);
}
