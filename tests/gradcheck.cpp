// tests/gradcheck.cpp — central finite differences and random test inputs
// (see gradcheck.hpp for the error measure).
#include "tests/gradcheck.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

namespace dtrain::test {

std::string GradCheckResult::str() const {
  std::ostringstream os;
  os << "gradcheck: checked " << checked << " (skipped kinks " << skipped << "), max error "
     << max_error << " (abs " << max_abs_error << ", scale " << max_grad << "), worst at " << worst << ": analytic " << worst_analytic
     << " vs numeric " << worst_numeric;
  return os.str();
}

GradCheckResult check_gradient(float* x, size_t n, const float* analytic,
                               const std::function<double()>& loss, const GradCheckOptions& opt) {
  std::vector<size_t> idx;
  if (opt.max_checks == 0 || opt.max_checks >= n) {
    idx.resize(n);
    std::iota(idx.begin(), idx.end(), size_t{0});
  } else {
    for (size_t j = 0; j < opt.max_checks; ++j) idx.push_back(j * n / opt.max_checks);
  }
  std::vector<double> numeric(idx.size()), one_sided_gap(idx.size(), 0.0);
  const double l0 = opt.kink_tol > 0.0 ? loss() : 0.0;
  for (size_t j = 0; j < idx.size(); ++j) {
    float& v = x[idx[j]];
    const float saved = v;
    // The step actually taken in float, so that rounding of x ± ε does not bias the quotient.
    const float plus = float(double(saved) + opt.eps), minus = float(double(saved) - opt.eps);
    v = plus;
    const double lp = loss();
    v = minus;
    const double lm = loss();
    v = saved;
    numeric[j] = (lp - lm) / (double(plus) - double(minus));
    if (opt.kink_tol > 0.0)
      one_sided_gap[j] = std::abs((lp - l0) / (double(plus) - double(saved)) -
                                  (l0 - lm) / (double(saved) - double(minus)));
  }
  GradCheckResult r;
  for (double g : numeric) r.max_grad = std::max(r.max_grad, std::abs(g));
  const double floor = std::max(opt.floor_rel * r.max_grad, 1e-30);
  bool first = true;
  for (size_t j = 0; j < idx.size(); ++j) {
    const double a = analytic[idx[j]], g = numeric[j];
    if (opt.kink_tol > 0.0 && one_sided_gap[j] > opt.kink_tol * std::max(std::abs(g), floor)) {
      ++r.skipped;
      continue;
    }
    ++r.checked;
    const double abs_err = std::abs(a - g);
    const double err = abs_err / std::max({std::abs(a), std::abs(g), floor});
    r.max_abs_error = std::max(r.max_abs_error, abs_err);
    if (err > r.max_error || first) {
      first = false;
      r.max_error = err;
      r.worst = idx[j];
      r.worst_analytic = a;
      r.worst_numeric = g;
    }
  }
  return r;
}

double dot(const float* r, const float* y, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; ++i) s += double(r[i]) * double(y[i]);
  return s;
}

std::vector<float> random_uniform(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

std::vector<float> random_distinct(size_t n, uint64_t seed, float gap) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = (float(i) - 0.5f * float(n)) * gap;
  std::mt19937_64 gen(seed);
  std::shuffle(v.begin(), v.end(), gen);
  return v;
}

std::vector<float> random_away_from_zero(size_t n, uint64_t seed, float margin) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> mag(margin, 1.0f);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> v(n);
  for (auto& x : v) x = sign(gen) ? mag(gen) : -mag(gen);
  return v;
}

}  // namespace dtrain::test
