// tests/gradcheck.hpp — central finite-difference gradient checking (after
// Caffe's GradientChecker), reusable by every backend's tests.
//
// The scalar under test is usually L = Σ r·y for a fixed random r (so that
// ∂L/∂y = r is what the backward pass receives as dy). For each checked input
// element x_i the numerical derivative is
//     (L(x_i + ε) − L(x_i − ε)) / 2ε
// evaluated by calling the loss closure (which must rerun the forward pass on
// the current contents of x; x is restored after each probe).
//
// Error measure, per element:  |a − n| / max(|a|, |n|, floor)
// with floor = floor_rel · max_j |n_j| (default 1e-2): a relative error for
// the entries that matter, an absolute one (scaled to the gradient's size)
// for entries near zero, where float cancellation in L(x ± ε) dominates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dtrain::test {

struct GradCheckOptions {
  double eps = 1e-2;          // probe step (in the units of x)
  double floor_rel = 1e-2;    // error floor, relative to max |numerical|
  size_t max_checks = 0;      // 0: every element; else an evenly spaced subset
  // Kink detection (0: off). Whole nets (ReLU, max pooling) have kinks that a
  // probe of ±ε may cross; there the one-sided differences (L(x+ε) − L(x))/ε and
  // (L(x) − L(x−ε))/ε disagree, while for a smooth L they differ by only ~ε·|L''|.
  // An element is skipped (counted in `skipped`) when
  //   |forward − backward| > kink_tol · max(|central|, floor).
  // Skipping cannot hide a wrong analytic gradient elsewhere; a test should still
  // bound `skipped` to a small fraction of `checked`.
  double kink_tol = 0.0;
};

struct GradCheckResult {
  double max_error = 0.0;     // max over checked elements of the measure above
  double max_abs_error = 0.0; // max |a − n|
  double max_grad = 0.0;      // max |n| (the scale)
  size_t worst = 0;           // index of the element with max_error
  double worst_analytic = 0.0, worst_numeric = 0.0;
  size_t checked = 0;         // elements compared (skipped ones excluded)
  size_t skipped = 0;         // elements skipped as kinks (kink_tol > 0)
  std::string str() const;    // one line for Catch2's INFO()
};

// Probes x[0..n) (modified in place, restored bit-exactly), compares with
// analytic[0..n). loss() returns the scalar as a double.
GradCheckResult check_gradient(float* x, size_t n, const float* analytic,
                               const std::function<double()>& loss,
                               const GradCheckOptions& opt = {});

inline GradCheckResult check_gradient(std::vector<float>& x, const std::vector<float>& analytic,
                                      const std::function<double()>& loss,
                                      const GradCheckOptions& opt = {}) {
  return check_gradient(x.data(), x.size(), analytic.data(), loss, opt);
}

// Σ r[i]·y[i] in double.
double dot(const float* r, const float* y, size_t n);
inline double dot(const std::vector<float>& r, const std::vector<float>& y) {
  return dot(r.data(), y.data(), r.size() < y.size() ? r.size() : y.size());
}

// n values uniform in [lo, hi), deterministic in seed.
std::vector<float> random_uniform(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f);

// n distinct values spaced `gap` apart, in random order and centred on 0: inputs
// of max pooling that keep every argmax stable under probes smaller than gap/2.
std::vector<float> random_distinct(size_t n, uint64_t seed, float gap = 0.1f);

// n values uniform in ±[margin, 1): away from the kink of ReLU at 0.
std::vector<float> random_away_from_zero(size_t n, uint64_t seed, float margin = 0.1f);

}  // namespace dtrain::test
