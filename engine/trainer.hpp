// engine/trainer.hpp — the training loop of one rank. The roles it runs:
// engine/worker_loop.hpp (with evaluator.hpp and run_recorder.hpp) and
// engine/server_loop.hpp; their shared, validated set-up: train_job.hpp.
//
// Workers, per step: read this worker's minibatch (io::Sampler), decode it,
// forward, softmax cross-entropy, backward — with each layer's gradient range
// handed to the exchange as soon as it is final, so buckets travel while
// backward continues — then finish the exchange and update (locally in
// allreduce mode; the servers' new parameters in ps/hybrid mode). Parameter
// servers run the exchange's server loop with the same SGD over flat ranges.
// Times per step: T_C = forward + backward + local update, t_comm = exchange
// time NOT hidden under backward, t_io_wait = reading and decoding. A
// non-finite loss stops the run with an Error naming the step (no silent NaN).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/config.hpp"

namespace dtrain::engine {

struct TrainResult {
  int64_t steps = 0;
  int epochs = 0;
  double last_loss = 0;        // mean training loss (all workers) of the last log interval
  double test_loss = -1;       // of the last evaluation (−1: none)
  double test_accuracy = -1;   // top-1, in [0, 1]
  double test_top5_accuracy = -1;  // in [0, 1]; −1: not scored (no test set, or fewer than 10 classes)
  double images_per_s = 0;     // training throughput, evaluation excluded (all workers)
  double seconds = 0;          // wall time of the loop, evaluation included
  bool server = false;         // this rank was a parameter server
  int nodes = 1;               // the workers' nodes (virtual with ranks-per-node, else real hosts)
  bool requeue = false;        // stopped on a signal after a checkpoint: exit kExitRequeue
  int64_t resumed_from_step = -1;  // the checkpoint's step of a resumed run (−1: a fresh start)
  int64_t nonfinite_skips = 0; // steps skipped for a non-finite gradient (rank 0)
  std::string metrics_path;    // rank 0: the metrics file written ("" = none)
  std::string run_dir;         // rank 0: the run folder ("" = none, engine/run_folder.hpp)
};

// Runs the job on this rank of `world` (collective: every rank calls it).
TrainResult train(const TrainConfig& cfg, MPI_Comm world = MPI_COMM_WORLD);

}  // namespace dtrain::engine
