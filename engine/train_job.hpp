// engine/train_job.hpp — one rank's share of a training job, built and
// validated before the run starts.
//
// Construction is the validation phase of `dtrain train` (DESIGN.md §5): the
// topology, the compute backend (a worker's GPU binding checked), the datasets
// (a bad file is a UsageError naming the option), the model, the learning-rate
// schedule, the optimizer and the failure-injection settings. Every usage
// error a rank can find is thrown here, before the barrier that lets rank 0
// create the run folder (engine/trainer.cpp) and before any collective whose
// participants could differ; a rank that throws joins the exit agreement
// (engine/exit.hpp) and the job ends with the message printed once.
//
// What it owns is what every role shares: the net's arenas (parameters,
// gradients, buffers), the Sgd's momentum, the schedule. The roles
// (WorkerLoop, ServerLoop, Evaluator, RunRecorder) keep their own state.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "comm/topology.hpp"
#include "comm/watchdog.hpp"
#include "engine/config.hpp"
#include "io/dataset.hpp"
#include "io/prefetcher.hpp"  // TaskCpuSplit
#include "io/sample_decoder.hpp"
#include "io/sampler.hpp"
#include "layers/backend.hpp"
#include "layers/net.hpp"
#include "layers/sgd.hpp"

namespace dtrain::engine {

// DTRAIN_FAIL_AT_STEP / DTRAIN_FAIL_RANK / DTRAIN_FAIL_MODE (core/settings.hpp),
// read once: the step at which a rank fails on purpose, and how (tests of the
// failure path). At a hit the caller throws when fire() says so.
struct FailureInjection {
  enum class Mode { throw_error, kill, stop };
  std::optional<long> at_step;
  std::optional<long> rank;  // none: every worker (servers only when named)
  Mode mode = Mode::throw_error;
  // DTRAIN_FAIL_POINT: where in the worker's step — "start" (before its
  // compute) or "check" (in the non-finite check, after the exchange).
  bool in_check = false;

  // Throws UsageError when DTRAIN_FAIL_RANK is not a rank of a `world_size`
  // job, DTRAIN_FAIL_MODE is not throw, kill or stop, or DTRAIN_FAIL_POINT
  // not start or check.
  static FailureInjection from_settings(int world_size);
  // The failure, at a hit: throw → returns true (the caller throws); kill →
  // raise(SIGKILL); stop → raise(SIGSTOP), then, if continued, returns false
  // (the rank goes on, as after a pause). Either signal comes 0.5 s after the
  // call, so the heartbeat (comm/watchdog.hpp) has carried the step first.
  bool fire() const;
  bool hits_worker(int64_t step, int world_rank) const {
    return at_step && *at_step == step && (!rank || *rank == world_rank);
  }
  bool hits_server(int64_t step, int world_rank) const {
    return at_step && *at_step == step && rank && *rank == world_rank;
  }
};

// Compute and loader threads of a rank: the job's (threads, loader-threads);
// else, under Slurm, the task's SLURM_CPUS_PER_TASK shared between them
// (io::split_task_cpus, less what the job fixed of either); else, for compute,
// `cpus_here` when > 0 (the rank's share of its CPU set, HostCpus::share in
// engine/placement.hpp: a rank bound to one core computes on one thread) or
// the host's cores / the ranks on it; for loading io::default_loader_threads,
// at most `cpus_here` when > 0.
io::TaskCpuSplit choose_thread_counts(const TrainConfig& cfg, int ranks_here, int cpus_here = 0);

class TrainJob {
 public:
  // Collective over `world` (topology, device binding). Throws UsageError for
  // a bad job; sets the process's compute threads and wait policy.
  TrainJob(const TrainConfig& cfg, MPI_Comm world);
  TrainJob(const TrainJob&) = delete;
  TrainJob& operator=(const TrainJob&) = delete;

  const TrainConfig& cfg;
  comm::Topology topo;
  int world_size = 1;
  int threads = 1;                           // compute threads of this rank
  int loader_threads = 1;                    // its loader threads (choose_thread_counts)
  std::vector<int> pinned;                   // CPUs its compute team is pinned to ({}: not pinned)
  int cuda_device = -1;                      // the worker's GPU (cuda), else −1
  std::unique_ptr<layers::Backend> backend;  // servers: the CPU backend, whatever the device
  std::unique_ptr<io::Dataset> train_set;     // raw or jpeg layout
  std::unique_ptr<io::Dataset> test_set;      // null: no evaluation
  std::optional<layers::Net> net;             // finalized: arenas initialised from cfg.seed
  io::InputTransform train_transform;         // the loader's: cfg's augmentation → the net's input
  io::InputTransform eval_transform;          // the evaluator's: resize + center crop → the net's input
  int64_t n_train = 0;                        // training samples used (max-train-samples applied)
  // This worker's epoch plan; on a server, worker 0's (servers read no batch:
  // they need its steps per epoch, the same on every worker, for the schedule).
  std::optional<io::Sampler> sampler;
  layers::LrSchedule schedule;       // total_steps: the steps this run takes (max-steps applied)
  std::unique_ptr<layers::Sgd> sgd;  // momentum state of the whole arena
  FailureInjection failures;
  comm::Watchdog* watchdog = nullptr;  // set by train() while its liveness ring runs (null: none)

  // The step this rank is at, for the watchdog's heartbeats.
  void report_step(int64_t step) const {
    if (watchdog) watchdog->set_step(step);
  }

  int rank() const { return topo.rank(); }
  bool on_device() const { return backend->discrete_memory(); }
  int64_t steps_per_epoch() const { return sampler->steps_per_epoch(); }
  int64_t global_batch() const { return static_cast<int64_t>(cfg.minibatch) * topo.num_workers(); }
  int64_t planned_steps() const { return schedule.total_steps; }
  int planned_epochs() const {
    return static_cast<int>((planned_steps() + steps_per_epoch() - 1) / steps_per_epoch());
  }
  int classes() const { return static_cast<int>(net->output_shape().c()); }
};

// The job's checked inputs, for train and tune alike; each throws UsageError
// (exit 2) whose message begins "option 'KEY': " (with_origin names where KEY
// was written):
// a dataset of either layout (raw or jpeg HDF5), a bad file naming `key`;
std::unique_ptr<io::Dataset> open_job_dataset(const std::string& path, const char* key);
// the job's model for `minibatch` and the datasets' class count (0: the
// model's own), an unknown one named as option 'model';
layers::Net make_job_net(const TrainConfig& cfg, int minibatch, int classes);
// the dataset's images through `t` (input_transform for the net's input) and
// its class count at most the model's `classes` (the same check for train and
// tune: tune's what-if mode wrote jobs train refused);
void check_fits(const io::Dataset& d, const io::InputTransform& t, int classes, const char* key);
// mean and std, each empty or one value per input channel.
void check_normalization(const TrainConfig& cfg, int64_t channels);

// What the loader (train) or the evaluator (!train) makes of each image for a
// net whose one-sample input is `in` ([1, C, H, W]), from cfg's augment keys.
io::InputTransform input_transform(const TrainConfig& cfg, const layers::Shape& in, bool train);

// Calls f with a host view of n floats at `data` (memory of `be`): the memory
// itself on host backends; on a device, a downloaded copy, uploaded back
// afterwards when write_back.
template <typename F>
void with_host_copy(layers::Backend& be, float* data, size_t n, bool write_back, F&& f) {
  if (!be.discrete_memory()) {
    f(data);
    return;
  }
  std::vector<float> h(std::max<size_t>(n, 1));
  be.download(data, h.data(), n * sizeof(float));
  f(h.data());
  if (write_back) be.upload(h.data(), data, n * sizeof(float));
}

}  // namespace dtrain::engine
