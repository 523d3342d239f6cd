// tests/test_evaluator.cpp — top-k counting of the evaluator (engine/evaluator.hpp):
// its tie rule by hand, against a plain sort, and k = 1 against the backend's argmax.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "engine/evaluator.hpp"
#include "layers/cpu/reference.hpp"

using dtrain::engine::count_top_k;

namespace {

// Plain reference: order the classes by score, highest first, equal scores by
// index (a stable sort); the sample counts when its label is among the first k.
int64_t sorted_top_k(const std::vector<float>& s, const std::vector<int32_t>& labels, int classes, int k) {
  int64_t hits = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    std::vector<int> order(static_cast<size_t>(classes));
    std::iota(order.begin(), order.end(), 0);
    const float* row = s.data() + i * static_cast<size_t>(classes);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
    const auto at = std::find(order.begin(), order.end(), labels[i]) - order.begin();
    hits += at < k ? 1 : 0;
  }
  return hits;
}

int64_t one(const std::vector<float>& s, int32_t label, int k) {
  return count_top_k(s.data(), &label, 1, static_cast<int>(s.size()), k);
}

}  // namespace

TEST_CASE("top-k: a class counts when fewer than k classes rank above it, ties to the lower index",
          "[evaluator]") {
  //                      0  1  2  3  4  5
  const std::vector<float> s{1, 3, 3, 3, 0, 2};
  // label: classes ranked above it (strictly larger, or equal with a lower index)
  const int above[6] = {4, 0, 1, 2, 5, 3};
  for (int32_t y = 0; y < 6; ++y)
    for (int k = 1; k <= 7; ++k) {
      INFO("label " << y << ", k " << k);
      CHECK(one(s, y, k) == (above[y] < k ? 1 : 0));
    }
  // All equal: the label's index is its rank.
  const std::vector<float> flat(10, 0.5f);
  for (int32_t y = 0; y < 10; ++y) CHECK(one(flat, y, 5) == (y < 5 ? 1 : 0));
  // NaN: a NaN label score never counts; a NaN elsewhere ranks above nothing.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(one({nan, 1, 2}, 0, 3) == 0);
  CHECK(one({nan, 1, nan, 0}, 3, 2) == 1);
  CHECK(one({nan, 1, nan, 0}, 3, 1) == 0);
  CHECK(one({-INFINITY, INFINITY, 0}, 1, 1) == 1);
  // A label outside [0, K) is an error, as in softmax_xent_forward.
  CHECK_THROWS(one(s, 6, 1));
}

TEST_CASE("top-k matches a plain sort, k = 1 matches the backend's argmax count", "[evaluator]") {
  auto be = dtrain::layers::make_reference_backend();
  std::mt19937 rng(7);
  for (int classes : {1, 2, 10, 37, 1000}) {
    const int n = 40;
    // Scores on a coarse grid, so that ties are frequent.
    std::uniform_int_distribution<int> grid(0, 6);
    std::uniform_int_distribution<int32_t> label(0, classes - 1);
    std::vector<float> s(static_cast<size_t>(n) * classes);
    std::vector<int32_t> y(static_cast<size_t>(n));
    for (float& v : s) v = 0.5f * static_cast<float>(grid(rng)) - 1.0f;
    for (int32_t& v : y) v = label(rng);
    int64_t last = 0;
    for (int k : {1, 2, 5, classes, classes + 3}) {
      INFO("classes " << classes << ", k " << k);
      const int64_t got = count_top_k(s.data(), y.data(), n, classes, k);
      CHECK(got == sorted_top_k(s, y, classes, k));
      CHECK(got >= last);  // more classes admitted, never fewer hits
      last = got;
      if (k >= classes) CHECK(got == n);
    }
    std::vector<float> probs(s.size());
    int64_t argmax_hits = -1;
    be->softmax_xent_forward(s.data(), y.data(), n, classes, probs.data(), &argmax_hits);
    CHECK(count_top_k(s.data(), y.data(), n, classes, 1) == argmax_hits);
  }
}
