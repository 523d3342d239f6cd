// comm/shard.cpp — the parameter-server shard map (DESIGN.md §3; contract in
// shard.hpp).
//
// Cutting: n slices of nearly equal size (sizes differ by at most one float):
//   need = ⌈total / max_slice⌉                 (no slice above max_slice)
//   want = max(need, 4·S) rounded up to a multiple of S (a few slices per
//          server, and equal counts per server: balance to within a float)
//   cap  = ⌊total / min_slice⌋                 (no slice below min_slice)
//   if want > cap: the largest multiple of S ≤ cap (if ≥ need and ≥ S),
//                  else max(cap, need, 1)
// Assignment: greedy bin-packing by bytes — slices by decreasing size (ties:
// lower begin first) each to the least-loaded server (ties: lower index).
// Everything is integer arithmetic on (total, S, max_slice, min_slice), so the
// map is a pure function of them.
#include "comm/shard.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"

namespace dtrain::comm {

namespace {
constexpr size_t kSlicesPerServer = 4;

size_t slice_count(size_t total, size_t s, size_t max_slice, size_t min_slice) {
  const size_t need = (total + max_slice - 1) / max_slice;
  size_t want = std::max(need, kSlicesPerServer * s);
  want = (want + s - 1) / s * s;
  const size_t cap = total / min_slice;
  if (want <= cap) return want;
  const size_t cap_multiple = cap / s * s;
  if (cap_multiple >= need && cap_multiple >= s) return cap_multiple;
  return std::max({cap, need, size_t{1}});
}
}  // namespace

ShardMap::ShardMap(size_t total, int num_servers, size_t max_slice, size_t min_slice)
    : total_(total), num_servers_(num_servers) {
  DT_CHECK(num_servers >= 0, "ShardMap: negative server count ", num_servers);
  DT_CHECK(max_slice > 0 && min_slice > 0, "ShardMap: slice bounds must be positive (max ", max_slice, ", min ",
           min_slice, ")");
  if (num_servers == 0 || total == 0) return;
  const size_t s = static_cast<size_t>(num_servers);
  const size_t n = slice_count(total, s, max_slice, min_slice);
  const size_t base = total / n, extra = total % n;
  slices_.resize(n);
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    slices_[i].begin = at;
    slices_[i].count = base + (i < extra ? 1 : 0);
    at += slices_[i].count;
  }

  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return slices_[a].count > slices_[b].count; });
  std::vector<size_t> load(s, 0);
  for (size_t i : order) {
    const size_t least = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    slices_[i].server = static_cast<int>(least);
    load[least] += slices_[i].count;
  }
}

std::vector<size_t> ShardMap::server_floats() const {
  std::vector<size_t> load(static_cast<size_t>(num_servers_), 0);
  for (const Slice& sl : slices_) load[static_cast<size_t>(sl.server)] += sl.count;
  return load;
}

double ShardMap::imbalance() const {
  if (num_servers_ == 0 || total_ == 0) return 1.0;
  auto load = server_floats();
  const double mean = static_cast<double>(total_) / num_servers_;
  return static_cast<double>(*std::max_element(load.begin(), load.end())) / mean;
}

}  // namespace dtrain::comm
