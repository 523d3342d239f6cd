// engine/config.hpp — the training job: Boost.Program_options over a job file
// (INI, keys = long option names) plus command-line overrides.
//
// The command line wins over the job file. An unknown key, a bad value or an
// impossible combination throws UsageError naming the key (and the job file),
// which the front end turns into exit code 2 before any work starts.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "comm/exchange.hpp"   // comm::Mode
#include "comm/wait.hpp"       // comm::WaitPolicy
#include "engine/options.hpp"  // option_style()
#include "io/augment.hpp"      // io::CropMode
#include "layers/sgd.hpp"      // layers::LrSchedule::Kind

namespace dtrain::engine {

// The bounds of the counts every command takes (train's options, bench compute,
// bench io), so that none runs what another refuses: a thread count past what
// the process may start crashed bench compute (2026-12-04).
inline constexpr int kMaxThreads = 1024;         // compute threads per rank
inline constexpr int kMaxLoaderThreads = 256;    // prefetch threads per rank
inline constexpr int kMaxLoaderDepth = 64;       // minibatches prefetched ahead
inline constexpr int kMaxMinibatch = 1 << 16;    // images per worker and step
inline constexpr int kMaxClasses = 100000;       // a model's outputs (the classes of its training file)

// Where a worker computes: cpu (oneDNN/BLAS), cuda (cuDNN/cuBLAS on a GPU),
// cpu_staged (the CPU kernels behind the cuda path's device memory model:
// runs the trainer's device path without a GPU, for tests).
enum class Device { cpu, cuda, cpu_staged };

// --on-nonfinite: what a step whose summed gradient has an Inf or NaN does.
enum class NonfinitePolicy { skip, abort };
const char* nonfinite_policy_name(NonfinitePolicy p);  // skip | abort

// The option strings of the enum-valued keys, as job files and the command
// line write them ("cpu-staged", "auto", ...). A TrainConfig holds only the
// enums: the strings are parsed once, by parse_train_args.
const char* device_name(Device d);                  // cpu | cuda | cpu-staged
const char* lr_schedule_name(layers::LrSchedule::Kind k);  // constant | step | cosine
// spin | sleep; nullopt: auto (comm::choose_wait_policy decides per node)
const char* wait_policy_option(const std::optional<comm::WaitPolicy>& p);
// "0.08,1", "3/4,4/3": a range as job files write it (shortest numbers).
std::string range_text(double lo, double hi);

struct TrainConfig {
  std::string job;           // the job file it came from ("" = command line only)
  std::string model = "lenet5";
  std::string train_data;    // HDF5, raw or jpeg layout (docs/data-formats.md)
  std::string test_data;     // HDF5, raw or jpeg; "" = no evaluation
  Device device = Device::cpu;  // --device cpu | cuda | cpu-staged
  bool reference_kernels = false;  // cpu, cpu-staged: the plain-loop reference backend (debugging)
  int64_t workspace_mb = 256;  // cuda: cuDNN workspace budget per convolution layer, MiB
  bool tf32 = false;           // cuda: allow TF32 tensor cores in convolutions and GEMMs
  layers::DType precision = layers::DType::f32;  // --precision fp32 | bf16 (activations, weight copies; layers/format.hpp)
  int threads = 0;           // compute threads per rank; 0 = engine/train_job.hpp choose_thread_counts

  int minibatch = 64;        // per worker, images
  int eval_minibatch = 0;    // 0 = minibatch
  int epochs = 10;
  int64_t max_steps = 0;     // stop after this many steps (0 = no limit)
  int64_t max_train_samples = 0;  // use only the first N training samples (0 = all)
  int64_t max_test_samples = 0;   // score only the first N test samples (0 = all)
  int64_t seed = 1;         // ≥ 0

  float lr = 0.01f;
  layers::LrSchedule::Kind lr_schedule = layers::LrSchedule::Kind::constant;  // constant | step | cosine
  float warmup_epochs = 0.0f;
  float lr_step_epochs = 0.0f;  // step schedule: decay every this many epochs (0 = not set)
  std::vector<float> lr_milestones;  // step schedule: decay at each of these epochs (increasing; empty = not set)
  float lr_gamma = 0.1f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  bool decay_bias_bn = true;
  float dropout = 0.5f;

  int loader_threads = 0;    // prefetch threads; 0 = choose_thread_counts (the task's CPUs shared)
  int loader_depth = 2;      // batches prefetched ahead
  io::CropMode augment = io::CropMode::none;  // training crop: none | crop | rrc (io/augment.hpp)
  int augment_pad = 0;       // random crop with this zero padding (0 = off); augment none only
  bool augment_flip = false; // random horizontal flip
  int64_t eval_resize = 0;   // R: shorter side before the center crop (eval) and the random crop (crop); 0 = round(input·256/224)
  double rrc_scale_min = 0.08, rrc_scale_max = 1.0;           // rrc: area fraction
  double rrc_ratio_min = 3.0 / 4.0, rrc_ratio_max = 4.0 / 3.0;  // rrc: aspect ratio w/h
  bool dct_scaling = true;   // jpeg: DCT-scaled decode when the crop is ≥ 2× the input

  std::vector<float> mean;   // per channel, on pixel/255 (empty = 0)
  std::vector<float> std;    // per channel (empty = 1)

  // Distribution (DESIGN.md §3): world = workers + ps servers (the last ranks).
  comm::Mode mode = comm::Mode::allreduce;  // allreduce | ps | hybrid
  int ps = 0;                // parameter-server ranks
  int ranks_per_node = 0;    // 0: real nodes; K: virtual nodes of K workers
  double bucket_mb = 1.0;    // allreduce bucket (fusion) size, MiB
  int64_t max_chunk_elems = (int64_t{1} << 31) - 1;  // every transfer is cut below this
  std::optional<comm::WaitPolicy> wait_policy;  // spin | sleep; nullopt = auto (comm/wait.hpp)
  double comm_timeout = 600;  // seconds a step's exchange may take before the job is aborted (0 = none)
  double heartbeat_timeout = 30;  // seconds a rank may miss heartbeats before the job is ended (0 = off; comm/watchdog.hpp)

  // Outputs (engine/run_folder.hpp): "auto" = into this run's own folder
  // RUNS_DIR/<run-name>/<n>/; "" = none; a path = that file (refused if it
  // exists, unless overwrite).
  std::string metrics = "auto";      // JSON Lines (rank 0)
  int log_interval = 50;             // steps between metric lines
  std::string save_params = "auto";  // HDF5 with /params and /buffers at the end
  std::string runs_dir = "runs";     // parent of the run folders
  std::string run_name;              // "" = the job file's stem, else "train"
  bool overwrite = false;            // an explicit existing metrics/save-params/timeline file may be replaced
  bool metrics_append = false;       // an explicit metrics file that exists is appended to (the starts of one requeued job)
  // Timeline (engine/timeline.hpp, docs/timeline.md): "" = off; auto =
  // timeline.json in the run folder; a path = that file (Trace Event Format JSON).
  std::string timeline;
  int64_t timeline_steps = 20;       // record the first N steps of the run
  // Checkpoints (engine/checkpoint.hpp, docs/reliability.md). "" = none.
  std::string checkpoint_dir;
  int64_t checkpoint_every_steps = 0;  // 0 = not by steps
  double checkpoint_every_s = 0;       // 0 = not by time (seconds of training since the last one)
  bool checkpoint_epoch_end = true;    // also at the end of every epoch
  int checkpoint_keep = 3;             // complete checkpoints kept
  std::string resume = "none";         // none | auto | PATH of a checkpoint file
  // Non-finite gradients: skip the step (at most max_nonfinite_skips in a row, then abort) or abort.
  NonfinitePolicy on_nonfinite = NonfinitePolicy::skip;
  int max_nonfinite_skips = 10;
  double clip_grad_norm = 0;           // > 0: scale the global gradient to this L2 norm at most
  // > 0: each worker spends this many ms per step instead of forward and
  // backward; the exchange still moves the model's whole arena
  // (engine/compute_stand_in.hpp). 0 = off. Refused with test-data,
  // checkpoint-dir and resume.
  double compute_stand_in_ms = 0;
  // Where each key given was written, the prefix of a message about it:
  // "command line: " or "job file 'PATH': " (the command line wins). Filled by
  // parse_train_args; with_origin uses it.
  std::map<std::string, std::string> origin;
};

// The nearest `dtrain train` option to `name` (itself when it is one; "" when none is close).
std::string nearest_train_option(const std::string& name);

// argv: the arguments after "train". Throws UsageError (exit 2) on a bad job
// (an unknown option or key names the nearest valid one, engine/options.hpp).
// Returns false when --help was asked for (nothing parsed).
bool parse_train_args(const std::vector<std::string>& args, TrainConfig& cfg);

// `message` with where its key was written in front when it begins
// "option 'KEY': " and KEY was given (cfg.origin): "job file 'j.ini': option
// 'mean': 3 values for 1 channels". Else `message` unchanged. For the checks
// after parsing (validate, and those of the training set-up: data files,
// model, channel counts).
std::string with_origin(const TrainConfig& cfg, const std::string& message);
std::string train_help();

}  // namespace dtrain::engine
