// comm/step_channel.hpp — the worker channel: the hand-off of one step between
// the training loop (the caller of Exchange) and the worker's communication
// thread (internal to comm/).
//
// Threading (after Horovod's background thread): every worker owns one
// communication thread; MPI must provide MPI_THREAD_MULTIPLE. The caller's
// side of a step only records state under the channel's mutex:
//   begin        step number, arena pointers, watermark = arena; wakes the thread
//   ready        adds [b, e) to the ready set; the watermark `lo` drops while
//                ranges join [lo, arena) (ranges normally arrive exactly
//                descending, but any exact cover is accepted)
//   finish       checks the cover is complete, blocks until the thread marks
//                the step done (exposed_s), rethrows the thread's exception
// The thread takes one step per begin (next_step), reads the watermark and
// the arena pointers (view, wait_to, wait_below) while it runs the step, and
// reports it done (done). quit() makes every wait of the thread throw
// Cancelled.
// An inline step (begin(…, run_here = true)) never reaches the thread: begin
// and ready wake nobody, and finish runs the step on the caller's thread
// (the same step code, reading the channel as the thread would) under a
// WaitDeadline of step_timeout_s (wait.hpp), so a stalled peer still ends the
// job rather than hanging it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>

#include "comm/exchange.hpp"

namespace dtrain::comm::detail {

class StepChannel {
 public:
  StepChannel(size_t arena, double step_timeout_s) : arena_(arena), timeout_s_(step_timeout_s) {}

  // ---- the caller (Exchange's worker API; Errors as documented there)
  // run_here: an inline step (above); finish then calls run(step, grads)
  // itself, the whole arena ready.
  void begin(int64_t step, float* params, float* grads, bool run_here = false);
  void ready(size_t begin, size_t end);
  StepTimes finish(float* params, float* grads, const std::function<void(int64_t, float*)>& run = {});
  bool stop();  // false when already stopped; Error inside a step
  bool in_step();

  // ---- the communication thread
  struct Cancelled {};
  // Waits for the next begin (seen: the last step taken); false on quit.
  bool next_step(uint64_t& seen);
  int64_t step();
  void done(std::exception_ptr error);  // the step is over (error: why it failed)
  void exited();                        // the thread has left its loop

  // The arena pointers (null until known) and the watermark (arena while the
  // pointers are unknown): [lo, arena) is ready.
  struct View {
    float* params = nullptr;
    float* grads = nullptr;
    size_t lo = 0;
  };
  View view();
  // Returns once [target, arena) is ready and the pointers are known.
  View wait_to(size_t target);
  // Waits at most timeout_s until ranges below `below` are ready (a poll).
  void wait_below(size_t below, double timeout_s);

  // ---- the owner: asks the thread to leave; true once it has within wait_s.
  bool quit(double wait_s);

  // Ends the job: the step's exchange did not complete within step_timeout_s
  // (prints the message once per job, then MPI_Abort; see finish).
  [[noreturn]] void abort_stalled();

 private:
  size_t wait_locked(std::unique_lock<std::mutex>& lk, size_t below, double timeout_s);

  const size_t arena_;
  const double timeout_s_;  // finish gives up after this long (0: never)
  std::mutex mu_;
  std::condition_variable cv_work_;  // caller → thread: a step, ready ranges, quit
  std::condition_variable cv_done_;  // thread → caller: the step is done, the thread left
  bool quit_ = false;
  bool exited_ = false;     // the thread has left its loop
  bool in_step_ = false;    // between begin and finish's return
  bool run_here_ = false;   // this step is inline: finish runs it
  bool step_done_ = false;
  bool broken_ = false;     // a step failed: no further steps
  bool stopped_ = false;
  uint64_t step_seq_ = 0;   // begin count (the thread runs each once)
  int64_t step_ = 0;
  float* params_ = nullptr;
  float* grads_ = nullptr;
  size_t lo_ = 0;                    // [lo_, arena) is ready
  std::map<size_t, size_t> pending_; // ready ranges above a gap: end → begin
  std::exception_ptr error_;
  // When the step's first gradient range was reported; StepTimes.busy_s runs
  // from here to the end of finish.
  std::chrono::steady_clock::time_point first_ready_{};
  bool any_ready_ = false;
};

}  // namespace dtrain::comm::detail
