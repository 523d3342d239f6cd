// comm/ring_allreduce.cpp — ring allreduce = reduce-scatter + all-gather
// (Patarasuk & Yuan 2009; the algorithm of Baidu's and Horovod's rings).
//
// n ranks, the range cut into n segments (sizes differ by at most one float),
// segment j = [j·⌊c/n⌋ + min(j, c mod n), …). K = 2(n−1) stages; at stage k,
// rank r sends one segment to its right neighbour r+1 and receives one from its
// left neighbour r−1 (tag k):
//   reduce-scatter k < n−1:  send seg (r−k), receive seg (r−k−1) into a
//                            scratch buffer, then x[seg] += scratch
//   all-gather t = k−(n−1):  send seg (r+1−t), receive seg (r−t) into x
// The segment received at stage k is the one sent at stage k+1, so the stages
// are pipelined piece by piece: each segment is cut into pieces of at most
// min(pipeline, max_chunk) floats (one message each); as soon as piece i of
// stage k has arrived (and been added), piece i of stage k+1 leaves. Receives
// of stage k+1 are posted before stage k is processed (scratch is
// double-buffered by stage parity); an all-gather receive into x first waits
// for the reduce-scatter send that read the same segment.
//
// Determinism: segment j is summed along the ring starting at rank j,
// ((x_j + x_{j+1}) + x_{j+2}) + … + x_{j−1}, a fixed order for a given
// (n, count);
// pieces and chunks cut transfers only, never the arithmetic. The all-gather
// copies bits, so every rank ends with identical values.
#include "comm/ring_allreduce.hpp"

#include <algorithm>

#include "comm/chunked.hpp"
#include "core/error.hpp"

namespace dtrain::comm::detail {

RingAllreduce::RingAllreduce(MPI_Comm comm, size_t max_chunk, size_t pipeline)
    : dup_(duplicate(comm)), comm_(dup_.get()), rank_(dup_.rank()), size_(dup_.size()) {
  piece_ = std::max<size_t>(1, std::min(clamp_chunk(max_chunk), pipeline));
  const size_t k = 2 * static_cast<size_t>(size_ - 1);
  send_.resize(k);
  recv_.resize(k);
}

void RingAllreduce::allreduce(float* x, size_t count) {
  const int n = size_;
  if (n == 1 || count == 0) return;
  const size_t un = static_cast<size_t>(n), base = count / un, extra = count % un;
  auto seg_begin = [&](int j) { return static_cast<size_t>(j) * base + std::min(static_cast<size_t>(j), extra); };
  auto seg_len = [&](int j) { return base + (static_cast<size_t>(j) < extra ? 1 : 0); };
  auto mod = [n](int v) { return ((v % n) + n) % n; };
  const int rs = n - 1, stages = 2 * (n - 1);
  auto send_seg = [&](int k) { return k < rs ? mod(rank_ - k) : mod(rank_ + 1 - (k - rs)); };
  auto recv_seg = [&](int k) { return k < rs ? mod(rank_ - k - 1) : mod(rank_ - (k - rs)); };
  const int right = mod(rank_ + 1), left = mod(rank_ - 1);

  const size_t max_seg = base + (extra ? 1 : 0);
  for (auto& t : tmp_)
    if (t.size() < max_seg) t.resize(max_seg);

  auto post_recv = [&](int k) {
    const int j = recv_seg(k);
    float* dst;
    if (k < rs) {
      dst = tmp_[k % 2].data();
    } else {
      wait_all(send_[static_cast<size_t>(k - rs)]);  // that send read x[seg j]
      dst = x + seg_begin(j);
    }
    irecv_chunked(dst, seg_len(j), left, k, comm_, piece_, recv_[static_cast<size_t>(k)]);
  };

  isend_chunked(x + seg_begin(send_seg(0)), seg_len(send_seg(0)), right, 0, comm_, piece_, send_[0]);
  post_recv(0);
  for (int k = 0; k < stages; ++k) {
    if (k + 1 < stages) post_recv(k + 1);
    const int j = recv_seg(k);
    float* seg = x + seg_begin(j);
    const size_t len = seg_len(j);
    auto& reqs = recv_[static_cast<size_t>(k)];
    const float* scratch = tmp_[k % 2].data();
    for (size_t i = 0, off = 0; off < len; ++i, off += piece_) {
      const size_t m = std::min(piece_, len - off);
      wait_one(reqs[i]);
      if (k < rs) {
        float* __restrict d = seg + off;
        const float* __restrict s = scratch + off;
        for (size_t e = 0; e < m; ++e) d[e] += s[e];
      }
      if (k + 1 < stages) {
        MPI_Request r;
        DT_CHECK_MPI(MPI_Isend(seg + off, static_cast<int>(m), MPI_FLOAT, right, k + 1, comm_, &r));
        send_[static_cast<size_t>(k + 1)].push_back(r);
      }
    }
    reqs.clear();
  }
  for (auto& s : send_) wait_all(s);
}

}  // namespace dtrain::comm::detail
