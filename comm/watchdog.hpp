// comm/watchdog.hpp — the liveness monitor of a training job: a rank that is
// killed, stopped (SIGSTOP) or frozen ends the whole job within a bounded time,
// with one message that names it (issue 14, "Dead and stuck ranks").
//
// Ranks form a ring: a background thread on rank r sends a small heartbeat
// {its current step} to rank (r+1) % n every `period_s` and watches the
// heartbeats of rank (r−1) % n. When none arrived for `timeout_s`, it prints
//   dtrain: error: rank R (ROLE on HOST) stopped responding: no heartbeat for
//   T s (its last step: S); ending the job
// on stderr (one line), flushes and calls MPI_Abort(MPI_COMM_WORLD, 1) — a
// rank other than 0 first sends the line to rank 0, whose thread writes it as
// the job's failure record (core/error.hpp record_failure), ≤ 0.6 s. The
// thread runs whatever the rank's main thread does (compute, evaluation, HDF5
// reads, checkpoint writes, a blocking MPI call), so only a process that is
// really stopped, dead or frozen is reported. A rank that leaves normally says
// "bye" to its successor (which stops watching it) and "gone" to its
// predecessor (which stops sending): ranks finish at different times (rank 0
// evaluates and saves files) without a false alarm. The protocol is written
// out in watchdog.cpp.
//
// Threading: MPI must provide MPI_THREAD_MULTIPLE; the thread uses its own
// duplicate of the world communicator (errors returned, not fatal).
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "comm/topology.hpp"

namespace dtrain::comm {

// Seconds between two heartbeats of a rank; a timeout must be longer.
inline constexpr double kHeartbeatPeriodS = 1.0;

struct WatchdogOptions {
  double period_s = kHeartbeatPeriodS;
  double timeout_s = 30;  // seconds without a heartbeat before the job is ended; > period_s
};

// "worker 3" or "parameter server 0": a rank's role, as messages name it.
std::string role_name(const Topology& topo);

class Watchdog {
 public:
  // Collective over `world` (duplicates it; allgathers every rank's host name
  // and `role`), then starts the thread. In a 1-rank world no thread runs.
  // Throws UsageError when timeout_s <= period_s or period_s <= 0.
  Watchdog(MPI_Comm world, const std::string& role, const WatchdogOptions& o);
  // Says bye to the neighbours, stops the thread, frees the communicator: local,
  // bounded (2.5 s at most, even when a neighbour is gone or stopped).
  // Call before MPI_Finalize.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // The step this rank is at, as its 0-based index (the next heartbeat
  // carries it; a change is sent within about 0.1 s); the message names it
  // as step index + 1, the numbering of progress lines, metrics and
  // checkpoint names. Thread-safe, lock-free.
  void set_step(int64_t step) { step_.store(step, std::memory_order_relaxed); }

  // Rank and "ROLE on HOST" of the rank this one watches (for messages, tests).
  int watched_rank() const { return pred_; }
  const std::string& watched_name() const { return pred_name_; }

 private:
  void loop();
  [[noreturn]] void report(const std::string& why, int64_t last_step);

  WatchdogOptions o_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, pred_ = 0, succ_ = 0;
  std::string pred_name_;  // "ROLE on HOST" of pred_
  std::atomic<int64_t> step_{-1};
  std::mutex mu_;
  std::condition_variable cv_;
  bool quit_ = false;
  std::thread thread_;
};

}  // namespace dtrain::comm
