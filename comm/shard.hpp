// comm/shard.hpp — the parameter-server shard map (DESIGN.md §3).
//
// The arena [0, total) floats is cut into contiguous slices of at most
// max_slice floats (default 1 Mi floats = 4 MiB) — and into at least a few
// slices per server when the arena is large enough, never cutting a slice
// below min_slice floats (default 16 Ki floats = 64 KiB) — and the slices are
// assigned to servers by bytes with greedy bin-packing (largest slice first,
// to the least-loaded server, ties to the lowest index). The map is a pure
// function of (total, num_servers, max_slice, min_slice): every rank computes
// the same map, and it is stable across restarts.
#pragma once

#include <cstddef>
#include <vector>

namespace dtrain::comm {

struct Slice {
  size_t begin = 0;  // floats
  size_t count = 0;
  int server = 0;
};

class ShardMap {
 public:
  ShardMap() = default;
  ShardMap(size_t total, int num_servers, size_t max_slice = size_t{1} << 20,
           size_t min_slice = size_t{1} << 14);

  const std::vector<Slice>& slices() const { return slices_; }  // ordered by begin
  std::vector<size_t> server_floats() const;  // load per server
  double imbalance() const;                   // max load / mean load (1 = perfect)
  int num_servers() const { return num_servers_; }
  size_t total() const { return total_; }

 private:
  size_t total_ = 0;
  int num_servers_ = 0;
  std::vector<Slice> slices_;
};

}  // namespace dtrain::comm
