// comm/ring_allreduce.hpp — deterministic chunked, pipelined ring allreduce
// (sum) of float ranges over a communicator (internal to comm/).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <vector>

#include "comm/discovery.hpp"

namespace dtrain::comm::detail {

class RingAllreduce {
 public:
  // comm is duplicated (collective over comm). max_chunk: largest message in
  // elements; pipeline: piece size in elements (each piece is one message).
  RingAllreduce(MPI_Comm comm, size_t max_chunk, size_t pipeline = size_t{1} << 17);
  RingAllreduce(const RingAllreduce&) = delete;
  RingAllreduce& operator=(const RingAllreduce&) = delete;

  // Collective: x[0, count) ← Σ over the ranks, identical bits on every rank,
  // and the same bits on every run with the same (size, count). Buffers grow
  // to the largest count seen, then stay allocated.
  void allreduce(float* x, size_t count);

 private:
  Comm dup_;  // this protocol's duplicate of the communicator
  const MPI_Comm comm_;
  const int rank_, size_;
  size_t piece_ = 0;
  std::vector<float> tmp_[2];
  std::vector<std::vector<MPI_Request>> send_, recv_;
};

}  // namespace dtrain::comm::detail
