// comm/step_channel.cpp — the worker channel (step_channel.hpp).
#include "comm/step_channel.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "comm/wait.hpp"
#include "core/error.hpp"

namespace dtrain::comm::detail {

using Clock = std::chrono::steady_clock;

void StepChannel::begin(int64_t step, float* params, float* grads, bool run_here) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    DT_CHECK(!broken_, "begin_step after a failed step");
    DT_CHECK(!stopped_, "begin_step after stop()");
    DT_CHECK(!in_step_, "begin_step(", step, ") while step ", step_, " is still open (finish_step missing)");
    in_step_ = true;
    step_done_ = false;
    step_ = step;
    params_ = params;
    grads_ = params != nullptr ? grads : nullptr;
    if (params == nullptr || grads == nullptr) params_ = grads_ = nullptr;
    lo_ = arena_;
    pending_.clear();
    error_ = nullptr;
    any_ready_ = false;
    run_here_ = run_here;
    if (run_here) return;  // the thread never sees this step
    ++step_seq_;
  }
  cv_work_.notify_all();
}

void StepChannel::ready(size_t begin, size_t end) {
  DT_CHECK(begin <= end && end <= arena_, "grads_ready [", begin, ", ", end, ") outside the arena of ", arena_,
           " floats");
  if (begin == end) return;
  bool moved = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    DT_CHECK(in_step_, "grads_ready outside a step (begin_step missing)");
    auto next = pending_.upper_bound(begin);  // first pending range ending after begin
    DT_CHECK(end <= lo_ && (next == pending_.end() || next->second >= end), "grads_ready [", begin, ", ", end,
             ") overlaps a range already reported this step");
    if (!any_ready_ && !run_here_) {  // an inline step is busy only inside finish
      any_ready_ = true;
      first_ready_ = Clock::now();
    }
    if (end == lo_) {  // the usual case, ranges in descending order: no bookkeeping
      lo_ = begin;
      moved = true;
    } else {
      pending_[end] = begin;
    }
    for (auto it = pending_.find(lo_); it != pending_.end(); it = pending_.find(lo_)) {
      lo_ = it->second;
      pending_.erase(it);
      moved = true;
    }
    moved = moved && !run_here_;  // an inline step has no thread to wake
  }
  if (moved) cv_work_.notify_all();
}

StepTimes StepChannel::finish(float* params, float* grads, const std::function<void(int64_t, float*)>& run) {
  StepTimes t;
  const Clock::time_point t0 = Clock::now();
  std::unique_lock<std::mutex> lk(mu_);
  DT_CHECK(in_step_, "finish_step without begin_step");
  if (lo_ != 0) {
    broken_ = true;
    DT_FAIL("finish_step(", step_, "): grads_ready did not cover the arena; [0, ", lo_, ") of ", arena_,
            " floats was never reported");
  }
  if (grads_ == nullptr) {
    params_ = params;
    grads_ = grads;
  } else {
    DT_CHECK(params_ == params && grads_ == grads, "finish_step: arena pointers differ from begin_step's");
  }
  if (run_here_) {  // an inline step: run it here, the lock released
    const int64_t step = step_;
    lk.unlock();
    std::exception_ptr err;
    try {
      const WaitDeadline deadline(timeout_s_, [this] { abort_stalled(); });
      run(step, grads);
    } catch (...) {
      err = std::current_exception();
    }
    lk.lock();
    error_ = err;
    step_done_ = true;
  } else {
    cv_work_.notify_all();
    if (timeout_s_ <= 0) {
      cv_done_.wait(lk, [&] { return step_done_; });
    } else {  // in slices of at most a quarter of the timeout, so a stop of this process is seen (LiveTimer)
      LiveTimer waited(timeout_s_ / 2);
      waited.start(Clock::now());
      const std::chrono::duration<double> slice(std::min(timeout_s_ / 4, 1.0));
      while (!cv_done_.wait_for(lk, slice, [&] { return step_done_; })) {
        if (waited.elapsed(Clock::now()) < timeout_s_) continue;
        lk.unlock();
        abort_stalled();
      }
    }
  }
  in_step_ = false;
  const Clock::time_point t1 = Clock::now();
  t.exposed_s = std::chrono::duration<double>(t1 - t0).count();
  // The exchange's whole span, one definition for every mode: from the first
  // gradients handed over to the end of this call. finish_step follows the
  // first grads_ready, so busy_s ≥ exposed_s and 1 − exposed/busy is the
  // fraction hidden under backward. An inline step works only in here:
  // busy_s = exposed_s, nothing hidden.
  t.busy_s = any_ready_ ? std::chrono::duration<double>(t1 - first_ready_).count() : t.exposed_s;
  if (error_) {
    broken_ = true;
    std::rethrow_exception(error_);
  }
  return t;
}

void StepChannel::abort_stalled() {
  int64_t step = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    broken_ = true;
    step = step_;
  }
  // The communication thread (or an inline step's own waits) is stuck inside
  // MPI with receives posted into the caller's arenas, and MPI keeps
  // progressing them: unwinding to the top level would free memory MPI may
  // still write into (seen: a segfault in opal_convertor_unpack on a member
  // rank). End the job here, with the message the top level would have
  // printed. Every live rank times out at about the same moment: each waits
  // its rank × 0.5 s (≤ 4 s) first, so the lowest live rank prints and aborts,
  // and the job shows one message rather than one per rank.
  const int r = std::max(0, ::dtrain::error_rank());
  std::this_thread::sleep_for(std::chrono::milliseconds(500 * std::min(r, 8)));
  const ::dtrain::Error e(::dtrain::detail::where(__FILE__, __LINE__) +
                          ::dtrain::detail::concat("step ", step + 1, ": the gradient exchange did not complete within ",
                                                   timeout_s_, " s (--comm-timeout): a peer rank stalled or died"));
  ::dtrain::record_failure(e.what());
  std::fprintf(stderr, "dtrain: error: %s\n", e.what());
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, ::dtrain::kExitFailure);
  throw e;  // not reached
}

bool StepChannel::stop() {
  std::lock_guard<std::mutex> lk(mu_);
  DT_CHECK(!in_step_, "stop() inside a step");
  if (stopped_) return false;
  stopped_ = true;
  return true;
}

bool StepChannel::in_step() {
  std::lock_guard<std::mutex> lk(mu_);
  return in_step_;
}

bool StepChannel::next_step(uint64_t& seen) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_work_.wait(lk, [&] { return quit_ || step_seq_ != seen; });
  if (quit_) return false;
  seen = step_seq_;
  return true;
}

int64_t StepChannel::step() {
  std::lock_guard<std::mutex> lk(mu_);
  return step_;
}

void StepChannel::done(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    error_ = error;
    step_done_ = true;
  }
  cv_done_.notify_all();
}

void StepChannel::exited() {
  std::lock_guard<std::mutex> lk(mu_);
  exited_ = true;
  cv_done_.notify_all();
}

StepChannel::View StepChannel::view() {
  std::lock_guard<std::mutex> lk(mu_);
  return {params_, grads_, grads_ != nullptr ? lo_ : arena_};
}

size_t StepChannel::wait_locked(std::unique_lock<std::mutex>& lk, size_t below, double timeout_s) {
  auto ok = [&] { return quit_ || (grads_ != nullptr && lo_ < below); };
  if (timeout_s < 0) cv_work_.wait(lk, ok);
  else cv_work_.wait_for(lk, std::chrono::duration<double>(timeout_s), ok);
  if (quit_) throw Cancelled{};
  return grads_ != nullptr ? lo_ : arena_;
}

StepChannel::View StepChannel::wait_to(size_t target) {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (grads_ != nullptr && lo_ <= target) return {params_, grads_, lo_};
    wait_locked(lk, grads_ == nullptr ? arena_ + 1 : lo_, -1);
  }
}

void StepChannel::wait_below(size_t below, double timeout_s) {
  std::unique_lock<std::mutex> lk(mu_);
  wait_locked(lk, below, timeout_s);
}

bool StepChannel::quit(double wait_s) {
  std::unique_lock<std::mutex> lk(mu_);
  quit_ = true;
  cv_work_.notify_all();
  return cv_done_.wait_for(lk, std::chrono::duration<double>(wait_s), [&] { return exited_; });
}

}  // namespace dtrain::comm::detail
