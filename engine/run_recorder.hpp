// engine/run_recorder.hpp — what a training run tells the world while it
// runs: rank 0's metrics file (JSON Lines, engine/metrics.hpp) and its
// line-buffered progress lines on stdout.
//
// Per log interval: a {"kind":"step"} record and the line
//   epoch E/Ep step s/spe loss … lr … img/s (T_C …, comm … exposed of …, io wait … = …%) elapsed … ETA …
// (a compute stand-in run: "… ETA … (compute stand-in X ms)", and
// "compute_stand_in_ms" in its step and epoch records)
// per epoch with a test set: a {"kind":"epoch"} record (test_loss,
// test_accuracy = top-1, and test_top5_accuracy with ≥ 10 classes) and
//   epoch E done in … s: test accuracy 91.20% (top-5 99.80%) test loss …
// Epochs are 1-based in both. Elapsed and ETA count from start(): the ETA is
// the mean time per step so far times the planned steps left. Other ranks hold
// a RunRecorder that writes nothing. Its state: the metrics file, the run clock
// and the run's plan (planned steps and epochs, steps per epoch). The run
// record (the last line, for `dtrain report`) is appended after the run, by
// append_run_record (engine/report.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "engine/metrics.hpp"

namespace dtrain::engine {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The sums of one log interval on this worker (times in seconds).
struct IntervalStats {
  double loss = 0;         // sum of the steps' mean losses
  double t_compute = 0;    // T_C: step time less the exposed exchange time
  double t_io = 0;         // waiting for the loader
  double t_comm = 0;       // exposed exchange time
  double t_comm_busy = 0;  // whole exchange time (hidden + exposed)
  double t_checkpoint = 0; // blocking part of checkpoints (gather + copy)
  double grads_ready_bytes = 0;  // gradient bytes handed to the exchange (its grads_ready); 0 without one
  int steps = 0;
  int steps_with_loss = 0; // steps whose loss was finite (the loss sum's count)
  int skipped = 0;         // steps whose update was skipped (non-finite gradient)
  Clock::time_point start = Clock::now();
};

// One interval as reported; epoch 1-based, step_in_epoch 1-based.
struct IntervalReport {
  int64_t step = 0;  // steps done
  int epoch = 1;
  int64_t step_in_epoch = 1;
  double loss = 0;   // mean over the interval and all workers
  float lr = 0;
  double images_per_s = 0;
  double wall_s = 0;  // the interval's wall time
};

class RunRecorder {
 public:
  // metrics_path "" = no file (all ranks but 0). rank0: print the progress lines.
  // compute_stand_in_ms > 0: a stand-in run (engine/compute_stand_in.hpp):
  // every step and epoch record carries "compute_stand_in_ms", every progress
  // line "(compute stand-in X ms)".
  // append: continue an existing metrics file (--metrics-append).
  RunRecorder(const std::string& metrics_path, bool rank0, int64_t planned_steps, int planned_epochs,
              int64_t steps_per_epoch, double compute_stand_in_ms = 0, bool append = false);

  // The run clock (elapsed, ETA); first_step: the steps done before (a resumed run).
  void start(int64_t first_step = 0) {
    run_start_ = Clock::now();
    first_step_ = first_step;
  }
  double elapsed() const { return seconds_since(run_start_); }

  void interval(const IntervalReport& r, const IntervalStats& s);
  // test_loss < 0: no evaluation; test_top5_accuracy < 0: not scored (fewer
  // than 10 classes), left out. Also records resident memory and open HDF5 objects.
  // at_resume: the evaluation a resumed run gives the epoch its checkpoint
  // ended (worker_loop.cpp), recorded with "at_resume": true.
  void epoch(int epoch, int64_t step, double test_loss, double test_accuracy, double test_top5_accuracy,
             double epoch_time_s, bool at_resume = false);
  // A checkpoint write that finished.
  void checkpoint(int64_t step, const std::string& path, uint64_t bytes, double snapshot_s, double write_s);

 private:
  MetricsWriter metrics_;
  bool rank0_;
  int64_t planned_steps_;
  int planned_epochs_;
  int64_t steps_per_epoch_;
  Clock::time_point run_start_ = Clock::now();
  int64_t first_step_ = 0;
  double stand_in_ms_ = 0;
  std::string stand_in_text_;  // " (compute stand-in X ms)" or ""
};

// This process's resident memory (bytes, /proc/self/statm).
uint64_t resident_bytes();

}  // namespace dtrain::engine
