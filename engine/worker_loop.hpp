// engine/worker_loop.hpp — the worker's loop: epochs of synchronous steps.
//
// Per step: the loader's next minibatch (io::Prefetcher, in the sampler's
// step order), forward, softmax cross-entropy of the global-batch mean loss,
// backward — each layer's gradient range handed to the exchange as soon as it
// is final, so buckets travel while backward continues — then the end of the
// exchange and the update (local SGD in allreduce mode and in a 1-rank job;
// the servers' new parameters in ps/hybrid mode). A non-finite loss (or one
// above 1e4) ends the run with an Error naming the step. Every log interval
// the mean loss over all workers goes to the RunRecorder; after every epoch
// the batch-norm buffers are averaged over the workers and the Evaluator
// scores the test set. The run stops after the schedule's total steps.
//
// State (what a checkpoint of a worker saves, with the TrainJob's arenas and
// momentum): step_ (steps done), epoch_ (0-based, the epoch running), the
// loader's position (it delivers (epoch_, step in epoch) next), the open log
// interval and the training time so far.
#pragma once

#include <cstdint>
#include <optional>

#include "comm/exchange.hpp"
#include "engine/compute.hpp"
#include "engine/evaluator.hpp"
#include "engine/run_folder.hpp"
#include "engine/run_recorder.hpp"
#include "engine/train_job.hpp"
#include "engine/trainer.hpp"
#include "io/prefetcher.hpp"

namespace dtrain::engine {

class WorkerLoop {
 public:
  // ex: null in a 1-rank job. out: rank 0's outputs (empty elsewhere).
  WorkerLoop(TrainJob& job, comm::Exchange* ex, const RunOutputs& out);

  // Runs to the end of the schedule; fills steps, epochs, losses, accuracy and times.
  void run(TrainResult& result);

  int64_t step() const { return step_; }
  int epoch() const { return epoch_; }

 private:
  // One epoch; returns false when the run's last step was taken in it.
  bool run_epoch(TrainResult& result);
  // One step, the s-th of the epoch: its loss and times go into interval_;
  // returns the step's learning rate.
  float train_step(int64_t s);
  void end_interval(int64_t s, float lr, TrainResult& result);
  void end_epoch(double epoch_time, TrainResult& result);

  TrainJob& job_;
  comm::Exchange* ex_;
  io::Prefetcher loader_;
  RunRecorder recorder_;
  std::optional<Evaluator> evaluator_;  // none without a test set
  StepBuffers dev_;                     // the minibatch in the backend's memory
  float loss_scale_;                    // 1 / global batch: the workers' sum is the 1-process gradient
  layers::GradReadyFn on_ready_;        // backward → exchange (none without an exchange)

  int64_t step_ = 0;    // steps done (the next step's index)
  int epoch_ = 0;       // 0-based
  IntervalStats interval_;
  double train_seconds_ = 0;  // wall time of the epochs, evaluation excluded
};

}  // namespace dtrain::engine
