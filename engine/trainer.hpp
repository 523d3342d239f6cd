// engine/trainer.hpp — the training loop of one rank.
//
// Per step: read this worker's minibatch (io::Sampler), decode it, forward,
// softmax cross-entropy, backward, SGD; time the parts (T_C = forward +
// backward + update, t_io_wait = reading and decoding); log metrics every
// log-interval steps; score the test set after every epoch. A non-finite loss
// stops the run with an Error naming the step (no silent NaN).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/config.hpp"

namespace dtrain::engine {

struct TrainResult {
  int64_t steps = 0;
  int epochs = 0;
  double last_loss = 0;        // mean training loss of the last log interval
  double test_loss = -1;       // of the last evaluation (−1: none)
  double test_accuracy = -1;   // in [0, 1]
  double images_per_s = 0;     // training throughput, evaluation excluded (all workers)
  double seconds = 0;          // wall time of the loop, evaluation included
};

// Runs the job on this process. rank/world: MPI identity (1 process for now).
TrainResult train(const TrainConfig& cfg, int rank = 0, int world = 1);

}  // namespace dtrain::engine
