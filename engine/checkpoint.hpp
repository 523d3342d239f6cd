// engine/checkpoint.hpp — what a training job saves and restores, and when
// (DESIGN.md §5 "Checkpoints", docs/reliability.md).
//
// One checkpoint (io/checkpoint.hpp writes it) holds everything needed to
// continue exactly:
//   arrays   params [P]      the parameters (in ps/hybrid: the servers' slices)
//            momentum [P]    the SGD momentum (in ps/hybrid: gathered from the
//                            servers that own the slices)
//            buffers [W, nb] every worker's batch-norm running statistics (they
//                            differ between workers inside an epoch)
//   ints     step (steps done), epoch and step_in_epoch of the next step,
//            seed, workers, servers, minibatch, global_batch, num_params,
//            num_buffers, layout_crc (the arena's parameter ranges),
//            steps_per_epoch, n_train, nonfinite_skips, consecutive_skips,
//            planned_steps
//   reals    train_seconds, lr (of the next step, for the log)
//   strings  model, mode, lr_schedule, rng
// RNG state: every random stream of dtrain is counter-based — the epoch's
// permutation is f(seed, epoch), augmentation f(seed, epoch, sample), dropout
// f(seed, step, worker) — so (seed, step) is the whole state ("rng" says so).
//
// When (Checkpointer::due): every N steps, every T seconds of training (rank
// 0's clock, agreed over the workers one step later: engine/preemption.hpp),
// at every epoch end, at the run's last step, and on a stop request (then the
// write is waited for and the job exits with kExitRequeue).
//
// Cost: the blocking part is the gather (servers → rank 0, workers' buffers →
// rank 0) and rank 0's host copy; the HDF5 write runs on a thread of rank 0,
// overlapped with the next steps (at most one write in flight). Both times go
// to the metrics ({"kind":"checkpoint"} records).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/exchange.hpp"
#include "engine/train_job.hpp"
#include "io/checkpoint.hpp"

namespace dtrain::engine {

// The loop's counters a checkpoint records (besides the arenas).
struct LoopState {
  int64_t step = 0;  // steps done
  int epoch = 0;     // 0-based epoch of the next step
  int64_t step_in_epoch = 0;
  double train_seconds = 0;
  int64_t nonfinite_skips = 0;
  int64_t consecutive_skips = 0;
};

// Where a resumed run continues: the saved counters and their file.
struct ResumePoint : LoopState {
  std::string path;  // the checkpoint file (rank 0)
};

// A finished write, for the metrics (rank 0).
struct CheckpointWritten {
  int64_t step = 0;
  std::string path;
  uint64_t bytes = 0;
  double snapshot_s = 0;  // blocking: gather + copy
  double write_s = 0;     // the thread's HDF5 write, fsyncs and renames
};

class Checkpointer {
 public:
  explicit Checkpointer(TrainJob& job);
  ~Checkpointer();  // waits for a write in flight (its error is logged, not thrown)
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  bool enabled() const { return store_ != nullptr; }
  // Whether the folder holds a checkpoint of this run's history: one was
  // taken, or the run resumed from one. For messages ("the last checkpoint is
  // intact").
  bool has_checkpoint() const { return has_checkpoint_; }

  // Collective over the world, before anything is written (exit 2 on every
  // rank with rank 0's message): rank 0 checks the folder (writable, free
  // space for two checkpoints, earlier checkpoints without --resume), removes
  // stray temporaries, and reads, verifies and checks the checkpoint to resume
  // from (model, arena layout, global minibatch, training set). Returns
  // whether the job resumes.
  bool prepare();

  // Collective over the world, after prepare() and before the exchange
  // broadcasts rank 0's parameters: rank 0's arena takes the checkpoint's
  // parameters; every rank its momentum (servers use their slices), every
  // worker its buffers row (the mean when the worker count changed).
  ResumePoint restore();

  // Whether a checkpoint is due after `steps_done` steps (deterministic: the
  // same on every worker); time-based ones come through the agreement.
  bool due_by_steps(int64_t steps_done, bool epoch_end) const;
  // Rank 0: whether checkpoint_every_s passed since the last checkpoint.
  bool due_by_time() const;

  // Workers, all of them: one checkpoint of `state`. ex: null in a 1-rank job.
  // final: the job stops after it (the servers leave serve()); the write is
  // waited for. Throws Error on rank 0 when the state is not finite or the
  // previous write failed.
  void take(const LoopState& state, comm::Exchange* ex, bool final);
  // Servers, after serve() returned for a checkpoint.
  void serve_side(comm::Exchange& ex);

  // Rank 0: writes finished since the last call (for the metrics). Throws
  // the Error of a write that failed since (called at every step boundary).
  std::vector<CheckpointWritten> finished();
  // Rank 0: waits for the write in flight; rethrows its error.
  void wait();

 private:
  struct Writer;
  TrainJob& job_;
  std::unique_ptr<io::CheckpointStore> store_;
  std::unique_ptr<Writer> writer_;               // rank 0
  std::optional<io::CheckpointState> resume_;    // rank 0, between prepare and restore
  std::string resume_path_;                      // rank 0: its file
  bool has_checkpoint_ = false;                  // has_checkpoint()
  double last_time_ = 0;                         // steady clock of the last checkpoint (rank 0)
};

// The newest valid checkpoint of `dir` for --resume auto, logging each file
// skipped; "" when the folder holds none. Throws UsageError when it holds
// checkpoint files but none is valid.
std::string resolve_auto_resume(const io::CheckpointStore& store);

}  // namespace dtrain::engine
