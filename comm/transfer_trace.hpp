// comm/transfer_trace.hpp — the timeline's view of a step's nonblocking
// transfers (internal to comm/; core/timeline.hpp, docs/timeline.md).
//
// A transfer is one logical message (a slice or a bucket to or from one peer)
// posted as one or more chunked requests. The step code keeps its requests in
// one vector; for every batch of requests it appends, it calls open() (a
// traced transfer) or untraced() (control and status messages), so request r
// of the vector maps to a transfer. completed(r) after MPI_Testsome /
// wait_some; when the transfer's last request completes, the event
// [posted, completed] goes into the buffer. close_all() after a wait_all: the
// transfers not yet seen complete end then. Times are when the communication
// thread observed the completion (at most one poll period late).
//
// Off (a null buffer): every call returns at once, nothing is stored. On: the
// vectors keep their capacity across steps (reset clears them), so a step
// allocates only while its shape is new.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/timeline.hpp"

namespace dtrain::comm::detail {

class TransferTrace {
 public:
  void reset(timeline::Buffer* b, int64_t step) {
    b_ = b;
    step_ = step;
    ops_.clear();
    req_op_.clear();
  }
  bool on() const { return b_ != nullptr; }

  // nreq requests of one transfer were just appended (nreq = 0: an empty one, recorded at once).
  void open(timeline::Kind k, size_t nreq, uint64_t bytes, int32_t index, int32_t peer) {
    if (!b_) return;
    const int64_t t = timeline::now_ns();
    if (nreq == 0) {
      b_->add(k, t, t, step_, bytes, index, peer);
      return;
    }
    ops_.push_back(Op{t, bytes, nreq, index, peer, k});
    req_op_.insert(req_op_.end(), nreq, static_cast<int32_t>(ops_.size() - 1));
  }
  void untraced(size_t nreq) {
    if (b_) req_op_.insert(req_op_.end(), nreq, -1);
  }
  // Request r of the step's vector completed.
  void completed(int r) {
    if (!b_) return;
    const int32_t o = req_op_[static_cast<size_t>(r)];
    if (o < 0) return;
    Op& op = ops_[static_cast<size_t>(o)];
    if (op.left > 0 && --op.left == 0) b_->add(op.kind, op.t0, timeline::now_ns(), step_, op.bytes, op.index, op.peer);
  }
  // Every transfer not seen complete completed now.
  void close_all() {
    if (!b_) return;
    const int64_t t = timeline::now_ns();
    for (Op& op : ops_)
      if (op.left > 0) {
        op.left = 0;
        b_->add(op.kind, op.t0, t, step_, op.bytes, op.index, op.peer);
      }
  }

 private:
  struct Op {
    int64_t t0;
    uint64_t bytes;
    size_t left;
    int32_t index, peer;
    timeline::Kind kind;
  };
  timeline::Buffer* b_ = nullptr;
  int64_t step_ = 0;
  std::vector<Op> ops_;
  std::vector<int32_t> req_op_;
};

}  // namespace dtrain::comm::detail
