// engine/train_job.cpp — the validation phase of a training run (train_job.hpp).
//
// The checks run in a fixed order, the same on every rank, so that every rank
// that fails reports the same first cause: launcher, topology, threads and
// wait policy, backend (GPU binding), outputs, datasets, model, normalisation,
// minibatch against the training set, schedule, failure injection, mode.
#include "engine/train_job.hpp"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <thread>

#include "comm/device_binding.hpp"
#include "comm/discovery.hpp"
#include "comm/wait.hpp"
#include "core/error.hpp"
#include "io/image_list.hpp"
#include "core/log.hpp"
#include "core/settings.hpp"
#include "engine/compute.hpp"
#include "engine/placement.hpp"
#include "engine/run_folder.hpp"
#include "layers/models.hpp"
#ifdef DTRAIN_HAVE_CUDA
#include "layers/cuda/cuda_backend.hpp"
#endif

namespace dtrain::engine {

namespace {

int hardware_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }


// The topology's options, after checking the launcher agrees with MPI's world size.
comm::TopologyOptions topology_options(const TrainConfig& cfg, MPI_Comm world) {
  int world_size = 1;
  DT_CHECK_MPI(MPI_Comm_size(world, &world_size));
  comm::check_launcher(world_size);
  // Virtual nodes matter only where the exchange uses nodes (hybrid).
  return {cfg.ps, cfg.mode == comm::Mode::hybrid ? cfg.ranks_per_node : 0};
}

// Files written by `dtrain data imagefolder` name their classes (/class_names):
// when both do, index k must be the same class in both, or the test accuracy
// would be silently wrong (a validation set converted without --class-table).
void check_same_classes(const std::string& train, const std::string& test) {
  const std::vector<std::string> a = io::class_names_if_any(train), b = io::class_names_if_any(test);
  if (a.empty() || b.empty() || a == b) return;
  size_t k = 0;
  while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
  DT_USAGE("options 'train-data' and 'test-data': ", train, " and ", test, " number their classes differently (",
           a.size(), " and ", b.size(), " classes; index ", k, " is '", k < a.size() ? a[k] : "(none)", "' in one, '",
           k < b.size() ? b[k] : "(none)", "' in the other). Convert the test set with --class-table ", train);
}

// The compute backend of a worker. cuda: the GPU of this rank's local rank
// among the workers of its host (local rank mod visible devices), checked to be
// no other worker's before any NCCL communicator exists.
std::unique_ptr<layers::Backend> make_worker_backend(const TrainConfig& cfg, const comm::Topology& topo,
                                                     int* cuda_device) {
  *cuda_device = -1;
  if (cfg.device != Device::cuda) return make_compute_backend(cfg, -1, false);
#ifdef DTRAIN_HAVE_CUDA
  const comm::Comm host = comm::split_host(topo.workers());  // freed on any exit
  const int device = layers::cuda_device_for_local_rank(host.rank());
  comm::check_device_binding(host.get(), device, layers::cuda_device_key(device));
  *cuda_device = device;
  return make_compute_backend(cfg, *cuda_device, topo.rank() == 0);
#else
  (void)topo;
  DT_USAGE("option 'device': cuda: this dtrain was built without the CUDA backend; use --device cpu");
#endif
}


// The schedule in steps: epochs of the job converted with `spe` steps per epoch.
layers::LrSchedule make_schedule(const TrainConfig& cfg, int64_t spe) {
  layers::LrSchedule sched;
  sched.kind = cfg.lr_schedule;
  sched.base_lr = cfg.lr;
  sched.warmup_steps = static_cast<int64_t>(std::llround(cfg.warmup_epochs * static_cast<double>(spe)));
  sched.step_size = static_cast<int64_t>(std::llround(cfg.lr_step_epochs * static_cast<double>(spe)));
  sched.gamma = cfg.lr_gamma;
  for (float m : cfg.lr_milestones) {  // epochs → steps (config.cpp checked them: > 0, increasing)
    const int64_t s = static_cast<int64_t>(std::llround(m * static_cast<double>(spe)));
    if (sched.kind == layers::LrSchedule::Kind::step && s < 1)
      DT_USAGE("option 'lr-milestones': ", m, " epochs is less than one step (", spe, " steps per epoch)");
    sched.milestones.push_back(s);
  }
  if (sched.kind == layers::LrSchedule::Kind::step && sched.milestones.empty() && sched.step_size < 1)
    DT_USAGE("option 'lr-step-epochs': ", cfg.lr_step_epochs, " epochs is less than one step (", spe, " steps per epoch)");
  sched.total_steps = spe * cfg.epochs;
  if (cfg.max_steps > 0) sched.total_steps = std::min(sched.total_steps, cfg.max_steps);
  return sched;
}

}  // namespace

std::unique_ptr<io::Dataset> open_job_dataset(const std::string& path, const char* key) {
  try {
    return io::open_dataset(path);
  } catch (const UsageError& e) {
    DT_USAGE("option '", key, "': ", e.what());
  }
}

layers::Net make_job_net(const TrainConfig& cfg, int minibatch, int classes) {
  layers::ModelOptions mo;
  mo.minibatch = minibatch;
  mo.classes = classes;
  mo.dropout = cfg.dropout;
  if (mo.classes > kMaxClasses)
    DT_USAGE("option 'train-data': ", cfg.train_data, ": ", mo.classes, " classes is more than this engine supports (",
             kMaxClasses, ")");
  try {
    return layers::make_model(cfg.model, mo);
  } catch (const UsageError& e) {
    DT_USAGE("option 'model': ", e.what());
  }
}

// Checks that a dataset fits the model's input (through the transform: the
// loader crops, resizes and converts channels) and class count.
void check_fits(const io::Dataset& d, const io::InputTransform& t, int classes, const char* key) {
  try {
    io::check_transform(d, t);
  } catch (const UsageError& e) {
    DT_USAGE("option '", key, "': ", e.what());
  }
  if (d.classes() > classes)
    DT_USAGE("option '", key, "': ", d.path(), " has ", d.classes(), " classes but the model outputs ", classes);
}

void check_normalization(const TrainConfig& cfg, int64_t channels) {
  for (const auto& [key, values] : {std::pair<const char*, const std::vector<float>&>{"mean", cfg.mean}, {"std", cfg.std}})
    if (!values.empty() && static_cast<int64_t>(values.size()) != channels)
      DT_USAGE("option '", key, "': ", values.size(), values.size() == 1 ? " value" : " values",
               ", but the model's input has ", channels, channels == 1 ? " channel" : " channels",
               " (one value per channel)");
}

io::InputTransform input_transform(const TrainConfig& cfg, const layers::Shape& in, bool train) {
  io::InputTransform t;
  t.input = io::ImageShape{in.h(), in.w(), in.c()};
  t.resize = cfg.eval_resize;
  t.train = train;
  t.dct_scaling = cfg.dct_scaling;
  t.fit_raw = cfg.augment != io::CropMode::none || cfg.eval_resize > 0;
  if (train) {
    t.augment.mode = cfg.augment;
    t.augment.pad = cfg.augment_pad;
    t.augment.flip = cfg.augment_flip;
    t.augment.scale_min = cfg.rrc_scale_min;
    t.augment.scale_max = cfg.rrc_scale_max;
    t.augment.ratio_min = cfg.rrc_ratio_min;
    t.augment.ratio_max = cfg.rrc_ratio_max;
  }
  return t;
}

FailureInjection FailureInjection::from_settings(int world_size) {
  FailureInjection f{settings::fail_at_step(), settings::fail_rank()};
  if (f.rank && (*f.rank < 0 || *f.rank >= world_size))
    DT_USAGE("DTRAIN_FAIL_RANK=", *f.rank, " is not a rank of this ", world_size, "-rank job");
  const std::string mode = settings::fail_mode();
  if (mode == "kill") f.mode = Mode::kill;
  else if (mode == "stop") f.mode = Mode::stop;
  else if (mode != "throw") DT_USAGE("DTRAIN_FAIL_MODE='", mode, "' is not throw, kill or stop");
  const std::string point = settings::fail_point();
  if (point == "check") f.in_check = true;
  else if (point != "start") DT_USAGE("DTRAIN_FAIL_POINT='", point, "' is not start or check");
  return f;
}

bool FailureInjection::fire() const {
  if (mode == Mode::throw_error) return true;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::fflush(stdout);
  std::fflush(stderr);
  std::raise(mode == Mode::kill ? SIGKILL : SIGSTOP);
  return false;
}

io::TaskCpuSplit choose_thread_counts(const TrainConfig& cfg, int ranks_here, int cpus_here) {
  io::TaskCpuSplit s;
  if (auto c = settings::slurm_cpus_per_task(); c && *c > 0) {
    const io::TaskCpuSplit t = io::split_task_cpus(*c, cfg.device == Device::cuda);
    s.compute = cfg.threads > 0        ? cfg.threads
                : cfg.loader_threads > 0 ? static_cast<int>(std::max(1L, *c - cfg.loader_threads))
                                         : t.compute;
    s.loaders = cfg.loader_threads > 0 ? cfg.loader_threads
                : cfg.threads > 0      ? static_cast<int>(std::max(1L, *c - cfg.threads))
                                       : t.loaders;
    return s;
  }
  // The rank's CPUs: its share of its CPU set, else the host's cores over its ranks;
  // the loaders io::default_loader_threads' count, at most that share.
  const int per_rank = cpus_here > 0 ? cpus_here : std::max(1, hardware_threads() / std::max(1, ranks_here));
  s.compute = cfg.threads > 0 ? cfg.threads : per_rank;
  s.loaders = cfg.loader_threads > 0 ? cfg.loader_threads : std::min(per_rank, io::default_loader_threads(ranks_here));
  return s;
}

TrainJob::TrainJob(const TrainConfig& c, MPI_Comm world) : cfg(c), topo(world, topology_options(c, world)) {
  world_size = topo.size();
  // Every rank's CPU set on this host (collective): the default thread counts
  // spread over this rank's share of it, and a rank that owns its CPUs pins.
  const HostCpus cpus = host_cpus(world);
  const io::TaskCpuSplit split = choose_thread_counts(cfg, topo.ranks_on_host(), cpus.share());
  threads = split.compute;
  loader_threads = split.loaders;
  // An explicit --threads beyond the rank's share of its CPUs: OpenMP and
  // oneDNN's teams spin on CPUs other ranks compute on, and a step took
  // 10–100× longer, without a word (a helper's finding, 2026-12-04).
  if (cfg.threads > cpus.share() && !settings::slurm_cpus_per_task() && topo.rank() == 0)
    log::warn("--threads ", cfg.threads, " but this rank's share of its CPUs is ", cpus.share(), " (",
              cpus.cpus.size(), " CPU(s) shared by ", cpus.sharers,
              " rank(s)): the compute threads oversubscribe the CPUs, and a step may run many times slower; "
              "--threads 0 takes the share");
  layers::set_cpu_threads(threads);
  // Compute threads pinned to the cores the rank owns (engine/placement.hpp),
  // unless OMP_PROC_BIND has the runtime bind them.
  if (threads > 1 && layers::cpu_place_cpus().empty()) pinned = layers::pin_cpu_threads(cpus.owned());
  comm::set_wait_policy(cfg.wait_policy ? *cfg.wait_policy
                                        : comm::choose_wait_policy("auto", topo.ranks_on_host(), threads,
                                                                   hardware_threads()));

  // Servers run the optimizer on host memory: the CPU backend, whatever the device.
  backend = topo.is_server() ? layers::make_backend(cfg.reference_kernels ? "reference" : "cpu")
                             : make_worker_backend(cfg, topo, &cuda_device);

  // Datasets are validated before any work (DESIGN.md §5): bad files are UsageErrors.
  // Servers open them too: the class count fixes the model's arena.
  check_outputs(cfg);
  train_set = open_job_dataset(cfg.train_data, "train-data");
  if (!cfg.test_data.empty()) test_set = open_job_dataset(cfg.test_data, "test-data");
  if (test_set) check_same_classes(cfg.train_data, cfg.test_data);
  if (test_set && test_set->classes() != train_set->classes() && rank() == 0)
    log::warn("train-data has ", train_set->classes(), " classes but test-data has ", test_set->classes(),
              "; the model gets ", std::max(train_set->classes(), test_set->classes()), " outputs");

  net.emplace(make_job_net(cfg, cfg.minibatch, std::max(train_set->classes(), test_set ? test_set->classes() : 0)));
  const layers::Shape in = net->input_shape();
  train_transform = input_transform(cfg, in, true);
  eval_transform = input_transform(cfg, in, false);
  check_fits(*train_set, train_transform, classes(), "train-data");
  if (test_set) check_fits(*test_set, eval_transform, classes(), "test-data");
  check_normalization(cfg, in.c());

  // Servers only update the float32 arena: the precision is the workers' business.
  net->finalize(*backend, static_cast<uint64_t>(cfg.seed),
                layers::NetOptions{topo.is_worker() ? cfg.precision : layers::DType::f32});

  n_train = train_set->n();
  if (cfg.max_train_samples > 0) n_train = std::min(n_train, cfg.max_train_samples);
  if (n_train < global_batch() && n_train < train_set->n())  // the cut is the cause: name its key (and source)
    DT_USAGE("option 'max-train-samples': ", cfg.max_train_samples, " keeps ", n_train, " of the ", train_set->n(),
             " samples of ", cfg.train_data, ", fewer than one global batch of ", topo.num_workers(),
             " workers × ", cfg.minibatch, " (minibatch)");
  if (n_train < global_batch())
    DT_USAGE("option 'minibatch': the training set ", cfg.train_data, " has ", n_train,
             " samples, fewer than one global batch of ", topo.num_workers(), " workers × ", cfg.minibatch);
  sampler.emplace(n_train, topo.num_workers(), topo.is_worker() ? topo.worker_index() : 0, cfg.minibatch,
                  static_cast<uint64_t>(cfg.seed));
  schedule = make_schedule(cfg, steps_per_epoch());
  // The warm-up reaches lr at step warmup_steps (counting from 0): a run of
  // that many steps or fewer never trains at lr (--max-steps, or warmup-epochs = epochs).
  if (schedule.warmup_steps > 0 && schedule.warmup_steps >= schedule.total_steps && rank() == 0)
    log::warn(cfg.max_steps > 0 && cfg.max_steps == schedule.total_steps
                  ? "option 'max-steps' = " + std::to_string(cfg.max_steps) + " ends the run"
                  : "the run's " + std::to_string(schedule.total_steps) + " steps end",
              " inside the warm-up of ", schedule.warmup_steps, " steps (warmup-epochs ", cfg.warmup_epochs, " × ",
              steps_per_epoch(), " steps per epoch): the learning rate never reaches lr = ", cfg.lr,
              " (its last step runs at ", schedule.at(schedule.total_steps - 1),
              "); lower warmup-epochs for a short run");

  layers::SgdOptions so;
  so.momentum = cfg.momentum;
  so.weight_decay = cfg.weight_decay;
  so.decay_bias_bn = cfg.decay_bias_bn;
  sgd = std::make_unique<layers::Sgd>(*backend, so, net->param_ranges(), net->num_params());

  failures = FailureInjection::from_settings(world_size);

  if (world_size == 1 && cfg.mode != comm::Mode::allreduce)
    DT_USAGE("option 'mode': ", comm::mode_name(cfg.mode), " needs parameter-server ranks; this job has 1 rank");
}

}  // namespace dtrain::engine
