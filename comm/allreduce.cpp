// comm/allreduce.cpp — recursive doubling and the choice between it and the
// ring (allreduce.hpp states both, with the crossover's source).
//
// Recursive doubling, messages on the duplicated communicator, tag = stage
// (0: fold, 1 + k: doubling step k, 63: unfold); every message is the whole
// range, chunked. A doubling step posts its receive into a scratch buffer and
// its send of x, waits for both, then adds in the pair's fixed order:
//   v < partner:  x[e] = x[e] + tmp[e]
//   v > partner:  x[e] = tmp[e] + x[e]
// so both partners evaluate x_lower + x_higher.
#include "comm/allreduce.hpp"

#include <algorithm>
#include <climits>
#include <functional>

#include "comm/chunked.hpp"
#include "core/error.hpp"

namespace dtrain::comm::detail {

size_t latency_max_bytes(int /*ranks*/) { return size_t{64} << 10; }  // the same for 2 … 5 ranks (allreduce.hpp)

const char* algo_name(AllreduceAlgo a) {
  return a == AllreduceAlgo::recursive_doubling ? "recursive doubling" : "ring";
}

namespace {
constexpr int kTagFold = 0, kTagUnfold = 63;

// d ← d + s (d_first: d is the lower rank's operand) or d ← s + d.
void add_in_order(float* __restrict d, const float* __restrict s, size_t n, bool d_first) {
  if (d_first)
    for (size_t e = 0; e < n; ++e) d[e] = d[e] + s[e];
  else
    for (size_t e = 0; e < n; ++e) d[e] = s[e] + d[e];
}
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
    send(x, count, rank_ + 1, kTagFold);
    wait_all(reqs_);
    recv(x, count, rank_ + 1, kTagUnfold);
    wait_all(reqs_);
    return;
  }
  if (rank_ < 2 * r) exchange(x, count, rank_ - 1, kTagFold, /*send=*/false, /*x_first=*/false);  // x_{2i} + x_{2i+1}
  const int v = rank_ < 2 * r ? rank_ / 2 : rank_ - r;
  auto real = [r](int vr) { return vr < r ? 2 * vr + 1 : vr + r; };
  for (int d = 1, k = 1; d < p; d *= 2, ++k) exchange(x, count, real(v ^ d), k, true, v < (v ^ d));
  if (rank_ < 2 * r) {  // unfold
    send(x, count, rank_ - 1, kTagUnfold);
    wait_all(reqs_);
  }
}

// The pieces of a count: ⌈count / piece⌉ of nearly equal size (differing by
// at most one float), the same cut on both sides of a transfer.
void RecursiveDoubling::cut(size_t count) {
  const size_t np = (count + piece_ - 1) / piece_, base = count / np, extra = count % np;
  bounds_.resize(np + 1);
  for (size_t i = 0; i <= np; ++i) bounds_[i] = i * base + std::min(i, extra);
}

void RecursiveDoubling::send(const float* x, size_t count, int peer, int tag) {
  cut(count);
  for (size_t i = 0; i + 1 < bounds_.size(); ++i)
    DT_CHECK_MPI(MPI_Isend(x + bounds_[i], static_cast<int>(bounds_[i + 1] - bounds_[i]), MPI_FLOAT, peer, tag, comm_,
                           &reqs_.emplace_back()));
}

void RecursiveDoubling::recv(float* x, size_t count, int peer, int tag) {
  cut(count);
  for (size_t i = 0; i + 1 < bounds_.size(); ++i)
    DT_CHECK_MPI(MPI_Irecv(x + bounds_[i], static_cast<int>(bounds_[i + 1] - bounds_[i]), MPI_FLOAT, peer, tag, comm_,
                           &reqs_.emplace_back()));
}

// Receives the peer's x into tmp (and sends ours when `send`), adding piece by
// piece as the pieces arrive: x = x + tmp (x_first) or x = tmp + x. A piece
// of x is written only after its own send completed.
void RecursiveDoubling::exchange(float* x, size_t count, int peer, int tag, bool send_too, bool x_first) {
  recv(tmp_.data(), count, peer, tag);
  const size_t np = reqs_.size();
  if (send_too) send(x, count, peer, tag);
  for (size_t i = 0; i < np; ++i) {
    wait_one(reqs_[i]);
    if (send_too) wait_one(reqs_[np + i]);
    add_in_order(x + bounds_[i], tmp_.data() + bounds_[i], bounds_[i + 1] - bounds_[i], x_first);
  }
  reqs_.clear();
}

Allreduce::Allreduce(MPI_Comm comm, size_t max_chunk, size_t latency_max)
    : latency_max_(latency_max), rd_(comm, max_chunk), ring_(comm, max_chunk) {
  if (latency_max_ == SIZE_MAX) {
    int n = 1;
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    latency_max_ = latency_max_bytes(n);
  }
}

void Allreduce::allreduce(float* x, size_t count) {
  if (algorithm(count) == AllreduceAlgo::recursive_doubling) rd_.allreduce(x, count);
  else ring_.allreduce(x, count);
}

}  // namespace dtrain::comm::detail

namespace dtrain::comm {

AllreduceTimes time_allreduce_algorithms(MPI_Comm c, size_t count, int iters) {
  DT_CHECK(iters >= 1 && count >= 1 && count <= static_cast<size_t>(INT_MAX), "time_allreduce_algorithms: count ",
           count, ", ", iters, " iterations");
  const size_t whole = static_cast<size_t>(INT_MAX);
  detail::RecursiveDoubling rd(c, whole);
  detail::RingAllreduce ring(c, whole);
  std::vector<float> x(count, 1.0f);
  const std::function<void()> run[3] = {
      [&] { DT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, x.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, c)); },
      [&] { rd.allreduce(x.data(), count); }, [&] { ring.allreduce(x.data(), count); }};
  std::vector<double> t[3];
  for (int i = 0; i <= iters; ++i)
    for (int a = 0; a < 3; ++a) {
      DT_CHECK_MPI(MPI_Barrier(c));
      const double t0 = MPI_Wtime();
      run[a]();
      double dt = MPI_Wtime() - t0, slowest = 0;
      DT_CHECK_MPI(MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, c));
      if (i > 0) t[a].push_back(slowest);
    }
  auto median = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  int n = 1;
  DT_CHECK_MPI(MPI_Comm_size(c, &n));
  AllreduceTimes r;
  r.mpi = median(t[0]);
  r.recursive_doubling = median(t[1]);
  r.ring = median(t[2]);
  r.picks_recursive_doubling = count * sizeof(float) <= detail::latency_max_bytes(n);
  return r;
}

}  // namespace dtrain::comm
