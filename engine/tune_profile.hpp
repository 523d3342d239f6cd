// engine/tune_profile.hpp — measurements the performance model needs, taken
// on the machine where `dtrain tune` runs (DESIGN.md §4):
//   T_C(X_mini)  seconds per training step of ONE worker alone (forward,
//                softmax cross-entropy, backward, SGD update) for each
//                candidate minibatch, median of a few real steps on real data
//                (the job's train-data) or on random input when it has none,
//                measured in every MPI rank in turn while the others sleep:
//                one sample per process, since a process's speed can differ
//                from the next one's on shared machines (the step-time model
//                uses the spread for the straggler term);
//   P            bytes of parameters (fp32: 4 · num_params);
//   memory       bytes: fixed = parameters + gradients + momentum (3·P) and per
//                sample = Σ_layers output numel / N · 4 bytes · 2 (activations
//                and their gradients), plus the convolution workspace cuDNN
//                chose within --workspace-mb (measured on the GPU; 0 on the CPU);
//   links        bandwidth (bytes/s) and per-message latency (s) from a
//                ping-pong between world ranks 0 and 1 (same node) and between
//                rank 0 and the first rank of the next (virtual) node, when run
//                under mpirun with ≥ 2 ranks; otherwise the given figures.
// The profile is written next to the tuned job file as JSON and read back by
// `dtrain report` to predict finished runs.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/config.hpp"
#include "engine/perfmodel.hpp"

namespace dtrain::engine {

inline constexpr size_t kMaxSamples = 512;

struct ComputePoint {
  int minibatch = 0;
  double t_c = 0;           // seconds per step, one worker alone on an idle machine: the
                            // median of `samples`
  std::vector<double> process_t_c;  // per profiled process (each MPI rank in turn, the
                            // others asleep): its median step / κ(threads + background)
  std::vector<double> samples;  // every profiled step of every process (/ κ likewise), at
                            // most kMaxSamples evenly picked: the distribution a worker's
                            // compute time is drawn from, step by step
  double background = 0;    // cores other processes used while it was measured
  double time_share = 1;    // η: CPU seconds per step of the profiled ranks all measuring at
                            // once (more threads than cores) over their T_C alone; 1 when
                            // they fit the cores or only one rank profiled
  double images_per_s = 0;  // minibatch / t_c
  double memory_bytes = 0;  // fixed + per_sample · minibatch (+ workspace)
};

struct Profile {
  std::string model;
  int threads = 1;              // compute threads of the profiled worker
  double cores = 1;             // hardware threads of the machine
  double param_bytes = 0;       // P
  double fixed_bytes = 0;       // parameters + gradients + momentum
  double per_sample_bytes = 0;  // activations + activation gradients per image
  double load_before = 0;       // 1-min load average when profiling started
  std::vector<ComputePoint> points;
  perf::Links links;
  std::string links_source;     // "ping-pong (N ranks)" or "given"
  double poll_period = 0;       // seconds per poll of a long sleeping wait (comm::measure_poll_cost); 0: not measured
  double poll_fraction = 0;     // fraction of a core such a wait uses
  bool t_c_given = false;       // T_C was given (dtrain tune --t-c-ms), not measured: it holds at any thread count
  double update_s = 0;          // T_U: a worker's local update (gradient check + SGD over the arena)
                                // on this machine, seconds; measured only with T_C given (dtrain tune
                                // --t-c-ms … --t-u-ms -1), since a measured T_C includes it. Added to
                                // T_C where workers update locally (allreduce): engine/predict.hpp

  // T_C at minibatch x: the measured point, or linear interpolation between
  // the two nearest (extrapolated proportionally outside). Throws Error when empty.
  double t_c_at(int x) const;
  // The per-step samples of the point nearest to x, scaled by t_c_at(x) / its t_c.
  std::vector<double> samples_at(int x) const;
  double time_share_at(int x) const;  // η of the point nearest to x
  // The measured point whose minibatch is nearest to x. Throws UsageError when there is none.
  const ComputePoint& nearest(int x) const;
  nlohmann::json to_json() const;
  static Profile from_json(const nlohmann::json& j);  // throws UsageError on a bad file
};

// Median seconds per step of `steps` real steps (after one warm-up step) of
// `cfg.model` at minibatch x with `threads` threads, in this process; every
// step's time is appended to *per_step when given, the process's CPU seconds
// per step (all threads, getrusage) stored in *cpu_per_step, and the bytes of
// convolution workspace the backend chose (cuDNN; 0 on the CPU) in *workspace.
// The backend and the device path are the trainer's (engine/compute.hpp):
// cfg.device cpu, cpu-staged or cuda (GPU 0).
double measure_step_time(const TrainConfig& cfg, int x, int steps, int threads,
                         std::vector<double>* per_step = nullptr, double* cpu_per_step = nullptr,
                         double* workspace = nullptr);

// Median seconds of a worker's local update of `cfg.model` with `threads`
// threads (the gradient's finite check, a pass over the arena, then the
// trainer's SGD step: what a worker does after the exchange in allreduce
// mode), over `reps` updates after one warm-up, on the trainer's backend.
double measure_update_time(const TrainConfig& cfg, int threads, int reps = 5);

// Memory figures of the model (bytes): fills fixed_bytes, per_sample_bytes, param_bytes.
void measure_memory(const std::string& model, int classes, Profile& p);

// Bandwidth and latency from a small (8 B) and a large (`bytes`) ping-pong
// (comm::pingpong_seconds between world ranks a and b, collective over `world`):
//   latency = fastest t(8 B) (the link, not the scheduler),  bandwidth = bytes / (t(bytes) − latency).
perf::Link measure_link(MPI_Comm world, int a, int b, size_t bytes);

double load_average_1m();  // /proc/loadavg; 0 when unreadable
// Busy CPU seconds of the whole machine since boot (/proc/stat: user system irq
// softirq steal — steal is time the hypervisor gave to other guests; nice time is
// left out: lowered-priority processes yield to the job); 0 when unreadable.
double machine_busy_seconds();
double self_cpu_seconds();  // user + system CPU seconds of this process (getrusage)

}  // namespace dtrain::engine
