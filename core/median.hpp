// core/median.hpp — the one median of dtrain: the benchmarks (bench compute,
// io, comm), the tuner's profile, dtrain report and the link discovery's
// ping-pong all take it, so an even count means the same everywhere.
#pragma once

#include <algorithm>
#include <vector>

namespace dtrain {

// The median of v (the mean of the middle two for an even count); 0 for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace dtrain
