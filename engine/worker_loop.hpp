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
// Non-finite gradients (--on-nonfinite): in allreduce mode and 1-rank jobs
// every worker checks the summed gradient it holds (bitwise the same on every
// worker, so every worker takes the same decision) and skips its SGD step; in
// ps/hybrid the servers decide jointly (comm::ServeHooks) and the senders
// learn it from the step's status. Skips are counted; max-nonfinite-skips in
// a row, or one under --on-nonfinite abort, end the run with an Error naming
// the step (rank 0 decides: a sender in every mode).
//
// Step boundaries (after a step, after the epoch's end when it was the last
// of its epoch): the stop agreement (engine/preemption.hpp), then a checkpoint
// when one is due (engine/checkpoint.hpp). On an agreed stop: one checkpoint
// of that step by every rank, then the loop returns with result.requeue.
//
// With --compute-stand-in-ms X (engine/compute_stand_in.hpp) a step runs no
// forward or backward: it spends X ms, filling the gradient arena with a
// constant and reporting backward's ranges to the exchange on the way; the
// loader keeps loading (its I/O wait is measured as in a real run), the
// exchange and the update run as usual, the loss is 0 and every record says
// "compute_stand_in_ms". T_C is then the stand-in's X plus the local update.
//
// State (what a checkpoint of a worker saves, with the TrainJob's arenas and
// momentum): step_ (steps done), epoch_ (0-based, the epoch running), the
// loader's position (it delivers (epoch_, step in epoch) next, from the
// checkpoint's position on a resume), the skip counters and the training time
// so far; the open log interval is not saved.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>

#include "comm/exchange.hpp"
#include "core/timeline.hpp"
#include "engine/checkpoint.hpp"
#include "engine/compute.hpp"
#include "engine/compute_stand_in.hpp"
#include "engine/evaluator.hpp"
#include "engine/preemption.hpp"
#include "engine/run_folder.hpp"
#include "engine/run_recorder.hpp"
#include "engine/train_job.hpp"
#include "engine/trainer.hpp"
#include "io/prefetcher.hpp"

namespace dtrain::engine {

class WorkerLoop {
 public:
  // ex: null in a 1-rank job. out: rank 0's outputs (empty elsewhere).
  // from: where a resumed run continues (the default: a fresh start).
  // tl: the main thread's timeline buffer (null: --timeline off).
  WorkerLoop(TrainJob& job, comm::Exchange* ex, const RunOutputs& out, Checkpointer& ckpt,
             const ResumePoint& from = {}, timeline::Buffer* tl = nullptr);

  // Runs to the end of the schedule, or to the step boundary where the
  // workers agreed to stop (a signal: result.requeue after the checkpoint);
  // fills steps, epochs, losses, accuracy and times.
  void run(TrainResult& result);

  int64_t step() const { return step_; }
  int epoch() const { return epoch_; }

 private:
  // One epoch from step `first` of it; returns false when the run ends in it
  // (its last step, or a stop).
  bool run_epoch(int64_t first, TrainResult& result);
  // One step, the s-th of the epoch: its loss and times go into interval_;
  // returns the step's learning rate.
  float train_step(int64_t s);
  // Allreduce mode and 1-rank jobs: the local check of the summed gradient
  // (identical on every worker) and the clipping; true when the step is skipped.
  // *norm: the gradient's L2 norm (+Inf when non-finite), or 0 where it was
  // not needed (no clipping: a 1-process check reads only the unproven ranges).
  bool check_local_gradient(double* norm);
  // The non-finite policy after a step (skipped or not); throws to abort.
  void count_skip(bool skipped);
  // A step boundary: the agreement, and a checkpoint when one is due.
  // Returns false when the job stops here (requeue).
  bool boundary(bool epoch_end, TrainResult& result);
  void end_interval(int64_t s, float lr, TrainResult& result);
  // An epoch's end, in two parts around the boundary (its checkpoint):
  // close_epoch (training time, batch-norm statistics averaged), then
  // evaluate_epoch (the test set and the epoch record) — so an evaluation
  // that fails (a damaged test file) finds the epoch already checkpointed.
  void close_epoch(double epoch_time, TrainResult& result);
  // epoch: 0-based; at_resume: a resumed run scoring the epoch its checkpoint ended.
  void evaluate_epoch(int epoch, double epoch_time, TrainResult& result, bool at_resume = false);
  LoopState loop_state() const;
  double trained_seconds() const;  // train_seconds_ plus the running epoch's part
  void check_same_params();

  TrainJob& job_;
  comm::Exchange* ex_;
  Checkpointer& ckpt_;
  ResumePoint from_;
  io::Prefetcher loader_;
  RunRecorder recorder_;
  std::optional<Evaluator> evaluator_;  // none without a test set
  StepBuffers dev_;                     // the minibatch in the backend's memory
  float loss_scale_;                    // 1 / global batch: the workers' sum is the 1-process gradient
  layers::GradReadyFn on_ready_;        // backward → exchange (none without an exchange)
  std::optional<ComputeStandIn> stand_in_;  // --compute-stand-in-ms: replaces forward and backward
  StopAgreement agreement_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> sample_trace_{nullptr, &std::fclose};
  timeline::Buffer* timeline_;  // null: off

  int64_t step_ = 0;    // steps done (the next step's index)
  int epoch_ = 0;       // 0-based
  IntervalStats interval_;
  double train_seconds_ = 0;  // wall time of the epochs done, evaluation excluded
  Clock::time_point epoch_start_{};
  bool in_epoch_ = false;     // inside run_epoch, before its close_epoch
  std::optional<long> inject_at_;  // test only: the step whose gradient gets +Inf here (read once)
  bool inject_ = false;            // this step writes +Inf into the gradient (DTRAIN_NONFINITE_AT_STEP)
  // How check_local_gradient reads the gradient (constructor): all of it, the
  // ranges backward did not prove finite, or a share of them with the bounds
  // added over the workers (allreduce mode).
  enum class GradCheck { whole, bounded_local, bounded_shared };
  GradCheck check_ = GradCheck::whole;
  bool peer_signalled_ = false;  // a server reported a stop request in the last step
  bool time_asked_ = false;      // rank 0 asked for a checkpoint by time, not yet taken
  int64_t nonfinite_skips_ = 0, consecutive_skips_ = 0;
};

}  // namespace dtrain::engine
