// engine/server_loop.hpp — the parameter server's loop (ps and hybrid modes).
//
// A server owns the slices of the arena the shard map gives it (comm/shard.hpp)
// and, in the TrainJob's Sgd, their momentum. Each step it receives one
// contribution per worker (ps) or per node leader (hybrid) for each slice, sums
// them in rank order (comm::Exchange::serve), applies the same SGD the workers
// use in allreduce mode with the schedule's learning rate of that step, and
// returns the new slice. It runs until the workers stop the exchange.
//
// Each step the servers check the summed gradient jointly (skip on Inf/NaN,
// optional global-norm clipping: comm::ServeHooks) and report a stop request
// (SIGUSR1/SIGTERM to this rank) in the step's status.
//
// State (what a checkpoint of a server saves, with its slices of the
// parameters and momentum, sent to rank 0): last_step_, the last step whose
// update rule it ran — in ps mode possibly speculatively, for a step the
// joint check then rolled back (comm::ServeHooks); the workers' step count is
// the checkpoint's.
#pragma once

#include <cstdint>

#include "comm/exchange.hpp"
#include "engine/checkpoint.hpp"
#include "engine/train_job.hpp"

namespace dtrain::engine {

class ServerLoop {
 public:
  ServerLoop(TrainJob& job, comm::Exchange& ex, Checkpointer& ckpt) : job_(job), ex_(ex), ckpt_(ckpt) {}

  // Serves until the workers stop, sending its slices of the parameters and
  // momentum for every checkpoint the workers ask for; throws Error for an
  // injected failure (DTRAIN_FAIL_AT_STEP with DTRAIN_FAIL_RANK naming this rank).
  void run();

  int64_t last_step() const { return last_step_; }
  bool requeue() const { return requeue_; }  // the job stopped after a checkpoint on a signal

 private:
  TrainJob& job_;
  comm::Exchange& ex_;
  Checkpointer& ckpt_;
  bool requeue_ = false;
  size_t first_begin_ = 0;  // where this server's first slice begins
  int64_t last_step_ = -1;  // none yet
};

}  // namespace dtrain::engine
