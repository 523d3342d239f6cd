// core/timeline.hpp — the timeline's event buffer (--timeline, docs/timeline.md).
//
// One Buffer per recording thread (a worker's main thread, its exchange
// thread; a server's serving thread), each written by its own thread only, so
// recording takes no lock and no atomic. A Buffer holds a fixed number of
// events allocated once, at construction; an event past the capacity is
// counted as dropped, never allocated. It records the steps
// [first_step, first_step + steps) only: for_step(step) returns the buffer
// inside that window and null outside, and code records through that pointer.
//
// Cost when off: the recording code holds a null Buffer* (for_step is never
// called), so each record site is one predictable branch on a null pointer,
// and no clock is read. When on: two steady_clock reads and a 40-byte store
// per event.
//
// Times are steady_clock (CLOCK_MONOTONIC) nanoseconds of this process; the
// engine maps them onto rank 0's clock when it writes the file
// (engine/timeline.hpp). Nothing here knows MPI, files or ranks.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace dtrain::timeline {

// What an event is. The names (kind_name) are the trace's event names, the
// categories (kind_category) its "cat"; docs/timeline.md says what each means.
enum class Kind : uint16_t {
  // worker, main thread
  step,           // one training step: loader wait .. update
  loader_wait,    // the wait for the loader's next minibatch (exposed I/O)
  forward,        // upload of the minibatch, forward, loss and its gradient
  backward,       // backward (buckets/slices leave during it)
  exchange_wait,  // finish_step: the exchange not hidden under backward
  update,         // local SGD (allreduce mode, 1-rank jobs) and the gradient check
  checkpoint,     // a checkpoint taken at a step boundary
  stand_in,       // --compute-stand-in-ms: the wait in place of forward + backward
  // worker, exchange thread
  exchange_step,  // the thread's work on one step
  allreduce,      // one bucket's ring allreduce over the workers (allreduce mode)
  push,           // gradient slice → server (ps; hybrid leader), or → leader (hybrid member)
  pull,           // parameter slice ← server, or ← leader
  member_recv,    // hybrid leader: a member's gradient slice (posted at the step's start)
  node_sum,       // hybrid leader: the node's sum of a slice
  member_send,    // hybrid leader: new parameters of a slice → a member
  node_reduce,    // device reducer: reduce of a slice to the leader
  node_bcast,     // device reducer: broadcast of a slice from the leader
  // server
  server_step,    // one step on a server: control messages .. replies sent
  server_recv,    // a sender's gradient slice, from posting to arrival
  aggregate,      // the sum of a slice over the senders
  joint_check,    // the servers' joint non-finite / norm check
  server_update,  // the update rule on a slice
  server_send,    // new parameters of a slice → a sender
  kCount
};

const char* kind_name(Kind k);
const char* kind_category(Kind k);

// One complete event: [t0_ns, t1_ns] on this process's steady clock.
struct Event {
  int64_t t0_ns;
  int64_t t1_ns;
  int64_t step;
  uint64_t bytes;  // payload of a transfer (0: none)
  int32_t index;   // slice or bucket index (−1: none)
  int32_t peer;    // world rank of the other side (−1: none)
  Kind kind;
  uint16_t pad = 0;
  uint32_t pad2 = 0;
};
static_assert(sizeof(Event) == 48);

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class Buffer {
 public:
  // capacity: events (allocated here, once). Records steps [first_step, first_step + steps).
  Buffer(size_t capacity, int64_t first_step, int64_t steps)
      : ev_(new Event[capacity > 0 ? capacity : 1]), cap_(capacity), first_(first_step), steps_(steps) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // This buffer for a step inside the window, else null.
  Buffer* for_step(int64_t step) { return step >= first_ && step - first_ < steps_ ? this : nullptr; }
  bool in_window(int64_t step) const { return step >= first_ && step - first_ < steps_; }

  void add(Kind k, int64_t t0, int64_t t1, int64_t step, uint64_t bytes = 0, int32_t index = -1,
           int32_t peer = -1) {
    if (n_ == cap_) {
      ++dropped_;
      return;
    }
    ev_[n_++] = Event{t0, t1, step, bytes, index, peer, k};
  }

  const Event* data() const { return ev_.get(); }
  size_t size() const { return n_; }
  size_t capacity() const { return cap_; }
  uint64_t dropped() const { return dropped_; }

 private:
  std::unique_ptr<Event[]> ev_;
  size_t cap_;
  size_t n_ = 0;
  uint64_t dropped_ = 0;
  int64_t first_, steps_;
};

// Records [construction, destruction) into b unless b is null (then it reads no clock).
class Span {
 public:
  Span(Buffer* b, Kind k, int64_t step, uint64_t bytes = 0, int32_t index = -1, int32_t peer = -1)
      : b_(b), k_(k), step_(step), bytes_(bytes), index_(index), peer_(peer), t0_(b ? now_ns() : 0) {}
  ~Span() {
    if (b_) b_->add(k_, t0_, now_ns(), step_, bytes_, index_, peer_);
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  Buffer* b_;
  Kind k_;
  int64_t step_;
  uint64_t bytes_;
  int32_t index_, peer_;
  int64_t t0_;
};

}  // namespace dtrain::timeline
