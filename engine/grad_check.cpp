// engine/grad_check.cpp — the allreduce-mode non-finite check (grad_check.hpp).
#include "engine/grad_check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "layers/sgd.hpp"

namespace dtrain {

bool summed_grads_finite(const layers::Net& net, int worker, int workers, bool own_bounds,
                         const std::function<void(double*, size_t)>& sum) {
  DT_CHECK(workers >= 1 && worker >= 0 && worker < workers, "worker ", worker, " of ", workers);
  const float* g = net.grads().data();
  const std::vector<std::pair<size_t, size_t>> rest = net.unbounded_grad_ranges();
  const std::vector<layers::Net::GradBound> bounds = net.grad_bounds();
  size_t total = 0;
  for (const auto& [lo, hi] : rest) total += hi - lo;
  // This worker's share [first, last) of the elements of `rest`, in order.
  const size_t first = total * static_cast<size_t>(worker) / static_cast<size_t>(workers);
  const size_t last = total * static_cast<size_t>(worker + 1) / static_cast<size_t>(workers);
  std::vector<double> v(1 + bounds.size());
  size_t pos = 0;  // elements of `rest` before [lo, hi)
  bool bad = false;
  for (const auto& [lo, hi] : rest) {
    const size_t a = std::max(first, pos), b = std::min(last, pos + (hi - lo));
    if (a < b && !std::isfinite(layers::sum_of_squares(g + lo + (a - pos), b - a))) bad = true;
    pos += hi - lo;
  }
  v[0] = bad ? 1.0 : 0.0;
  for (size_t l = 0; l < bounds.size(); ++l)
    v[1 + l] = own_bounds ? bounds[l].bound : std::numeric_limits<double>::infinity();
  sum(v.data(), v.size());
  if (v[0] != 0.0) return false;
  for (size_t l = 0; l < bounds.size(); ++l)
    if (!(v[1 + l] < layers::kGradBoundLimit) &&
        !std::isfinite(layers::sum_of_squares(g + bounds[l].begin, bounds[l].end - bounds[l].begin)))
      return false;
  return true;
}

}  // namespace dtrain
