// engine/server_loop.hpp — the parameter server's loop (ps and hybrid modes).
//
// A server owns the slices of the arena the shard map gives it (comm/shard.hpp)
// and, in the TrainJob's Sgd, their momentum. Each step it receives one
// contribution per worker (ps) or per node leader (hybrid) for each slice, sums
// them in rank order (comm::Exchange::serve), applies the same SGD the workers
// use in allreduce mode with the schedule's learning rate of that step, and
// returns the new slice. It runs until the workers stop the exchange.
//
// State (what a checkpoint of a server saves, with its slices of the
// parameters and momentum): last_step_, the last step whose update it applied.
#pragma once

#include <cstdint>

#include "comm/exchange.hpp"
#include "engine/train_job.hpp"

namespace dtrain::engine {

class ServerLoop {
 public:
  ServerLoop(TrainJob& job, comm::Exchange& ex) : job_(job), ex_(ex) {}

  // Serves until the workers stop; throws Error for an injected failure
  // (DTRAIN_FAIL_AT_STEP with DTRAIN_FAIL_RANK naming this rank).
  void run();

  int64_t last_step() const { return last_step_; }

 private:
  TrainJob& job_;
  comm::Exchange& ex_;
  int64_t last_step_ = -1;  // none yet
};

}  // namespace dtrain::engine
