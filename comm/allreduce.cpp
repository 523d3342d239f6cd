// comm/allreduce.cpp — recursive doubling and the choice between it and the
// ring (allreduce.hpp states both, with the crossover's source).
//
// Recursive doubling, messages on the duplicated communicator, tag = stage
// (0: fold, 1 + k: doubling step k, 63: unfold); every message is the whole
// range in pieces (chunked.hpp). A doubling step posts its receive into a
// scratch buffer and its send of x, and adds each piece, x[e] += tmp[e], once
// both of its transfers completed: both partners add the same two operands,
// and IEEE addition is commutative, so both hold the same bits.
#include "comm/allreduce.hpp"

#include <algorithm>
#include <cstdint>

#include "comm/chunked.hpp"
#include "core/error.hpp"

namespace dtrain::comm::detail {

const char* algo_name(AllreduceAlgo a) {
  return a == AllreduceAlgo::recursive_doubling ? "recursive doubling" : "ring";
}

namespace {
constexpr int kTagFold = 0, kTagUnfold = 63;
}  // namespace

RecursiveDoubling::RecursiveDoubling(MPI_Comm comm, size_t max_chunk, size_t piece)
    : dup_(duplicate(comm)),
      comm_(dup_.get()),
      rank_(dup_.rank()),
      size_(dup_.size()),
      piece_(std::max<size_t>(1, std::min(clamp_chunk(max_chunk), piece))) {}

void RecursiveDoubling::allreduce(float* x, size_t count) {
  const int n = size_;
  if (n == 1 || count == 0) return;
  if (tmp_.size() < count) tmp_.resize(count);
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int r = n - p;
  // Fold: the even rank of each of the first r pairs hands its x over and sits out.
  if (rank_ < 2 * r && rank_ % 2 == 0) {
    isend_chunked(x, count, rank_ + 1, kTagFold, comm_, piece_, reqs_);
    wait_all(reqs_);
    irecv_chunked(x, count, rank_ + 1, kTagUnfold, comm_, piece_, reqs_);
    wait_all(reqs_);
    return;
  }
  if (rank_ < 2 * r) exchange(x, count, rank_ - 1, kTagFold, /*send_too=*/false);  // x_{2i+1} + x_{2i}
  const int v = rank_ < 2 * r ? rank_ / 2 : rank_ - r;
  auto real = [r](int vr) { return vr < r ? 2 * vr + 1 : vr + r; };
  for (int d = 1, k = 1; d < p; d *= 2, ++k) exchange(x, count, real(v ^ d), k, /*send_too=*/true);
  if (rank_ < 2 * r) {  // unfold
    isend_chunked(x, count, rank_ - 1, kTagUnfold, comm_, piece_, reqs_);
    wait_all(reqs_);
  }
}

// Receives the peer's x into tmp (and sends ours when send_too), adding piece
// by piece as the pieces arrive; a piece of x is written only after its own
// send completed.
void RecursiveDoubling::exchange(float* x, size_t count, int peer, int tag, bool send_too) {
  irecv_chunked(tmp_.data(), count, peer, tag, comm_, piece_, reqs_);
  const size_t np = reqs_.size();
  if (send_too) isend_chunked(x, count, peer, tag, comm_, piece_, reqs_);
  for (size_t i = 0; i < np; ++i) {
    wait_one(reqs_[i]);
    if (send_too) wait_one(reqs_[np + i]);
    const size_t off = i * piece_, end = std::min(count, off + piece_);
    for (size_t e = off; e < end; ++e) x[e] += tmp_[e];
  }
  reqs_.clear();
}

Allreduce::Allreduce(MPI_Comm comm, size_t max_chunk, size_t latency_max)
    : rd_(comm, max_chunk),
      ring_(comm, max_chunk),
      latency_max_(latency_max == SIZE_MAX ? latency_max_for(rd_.size()) : latency_max) {}

void Allreduce::allreduce(float* x, size_t count) {
  if (algorithm(count) == AllreduceAlgo::recursive_doubling) rd_.allreduce(x, count);
  else ring_.allreduce(x, count);
}

}  // namespace dtrain::comm::detail
