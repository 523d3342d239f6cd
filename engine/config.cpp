// engine/config.cpp — job file + command line → TrainConfig.
#include "engine/config.hpp"

#include <algorithm>
#include <climits>  // NAME_MAX
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <type_traits>

#include "comm/watchdog.hpp"  // kHeartbeatPeriodS
#include "core/error.hpp"
#include "core/format.hpp"
#include "layers/models.hpp"

namespace po = boost::program_options;

namespace dtrain::engine {

namespace {

// A job file's line in a message: its invisible bytes as \xNN, at most 120
// bytes of it (a 200 KB line was echoed whole).
std::string shown_line(const std::string& line) {
  if (line.size() <= 120) return visible(line);
  return visible(line.substr(0, 120)) + "… (" + std::to_string(line.size()) + " bytes)";
}

// Comma-separated floats ("0.2860,0.3530") for per-channel statistics.
std::vector<float> parse_floats(const std::string& key, const std::string& s) {
  std::vector<float> v;
  if (s.empty()) return v;
  // Spaces around an item are allowed ("0.5, 0.4" in a job file); a last empty
  // item ("0.5,") is one too.
  for (const std::string& item : list_items(s)) {
    if (item.empty()) DT_USAGE("option '", key, "': '", visible(s), "' has an empty item: give comma-separated numbers");
    const std::string why = float_problem(item);
    if (why.starts_with("which is not"))
      DT_USAGE("option '", key, "': '", visible(s), "' is not a comma-separated list of decimal numbers (such as 0.5,0.25)");
    if (!why.empty())
      DT_USAGE("option '", key, "': '", visible(item), "'", item == s ? "" : " in '" + visible(s) + "'", ", ", why);
    v.push_back(std::strtof(item.c_str(), nullptr));
  }
  return v;
}

// "lo,hi" of two numbers, each a decimal or a fraction p/q ("3/4,4/3"), lo ≤ hi.
void parse_range(const char* key, const std::string& s, double* lo, double* hi) {
  // One decimal as the options read it (engine/options.hpp double_problem).
  auto decimal = [&](const std::string& t, double* v) {
    const std::string why = double_problem(t);
    if (why.starts_with("which is not")) return false;
    if (!why.empty()) DT_USAGE("option '", key, "': '", visible(t), "' in '", visible(s), "', ", why);  // a range has two
    *v = std::strtod(t.c_str(), nullptr);
    return true;
  };
  auto number = [&](const std::string& text, double* v) {
    const std::string t = trim_blanks(text);  // "0.08, 1" or "3 / 4" in a job file
    const size_t slash = t.find('/');
    if (slash == std::string::npos) return decimal(t, v);
    double p = 0, q = 0;
    if (!decimal(trim_blanks(t.substr(0, slash)), &p) || !decimal(trim_blanks(t.substr(slash + 1)), &q)) return false;
    // Both keys (rrc-scale, rrc-ratio) are positive: 3/0 was "not a range",
    // -3/-4 was taken as 0.75.
    if (!(p > 0 && q > 0))
      DT_USAGE("option '", key, "': '", visible(t), "' in '", visible(s),
               "': a fraction's numerator and denominator must be positive numbers");
    *v = p / q;
    return true;
  };
  const size_t comma = s.find(',');
  if (comma == std::string::npos || !number(s.substr(0, comma), lo) || !number(s.substr(comma + 1), hi) ||
      !std::isfinite(*lo) || !std::isfinite(*hi))
    DT_USAGE("option '", key, "': '", visible(s), "' is not a range MIN,MAX of two numbers (decimals or fractions like 3/4)");
  if (*lo > *hi) DT_USAGE("option '", key, "': '", visible(s), "': MIN ", *lo, " is larger than MAX ", *hi);
}

// A typed option with its default shown as a person writes it: shortest
// round-trip numbers ("0.05", not "0.0500000007"), true/false for booleans.
template <typename T>
po::typed_value<T>* def(T* v) {
  if constexpr (std::is_same_v<T, bool>)
    return po::value(v)->default_value(*v, format::boolean(*v));
  else if constexpr (std::is_arithmetic_v<T>)
    return po::value(v)->default_value(*v, format::shortest(*v));
  else
    return po::value(v)->default_value(*v);
}

// The option strings of an enum-valued key, in the order its error message lists them.
template <typename E>
struct Choice {
  const char* name;
  E value;
};
constexpr Choice<Device> kDevices[] = {{"cpu", Device::cpu}, {"cuda", Device::cuda}, {"cpu-staged", Device::cpu_staged}};
using LrKind = layers::LrSchedule::Kind;
constexpr Choice<LrKind> kSchedules[] = {{"constant", LrKind::constant}, {"step", LrKind::step}, {"cosine", LrKind::cosine}};
constexpr Choice<comm::Mode> kModes[] = {
    {"allreduce", comm::Mode::allreduce}, {"ps", comm::Mode::ps}, {"hybrid", comm::Mode::hybrid}};
constexpr Choice<io::CropMode> kCrops[] = {
    {"none", io::CropMode::none}, {"crop", io::CropMode::crop}, {"rrc", io::CropMode::rrc}};
constexpr Choice<NonfinitePolicy> kNonfinite[] = {{"skip", NonfinitePolicy::skip}, {"abort", NonfinitePolicy::abort}};
using WaitChoice = std::optional<comm::WaitPolicy>;
const Choice<WaitChoice> kWaits[] = {
    {"spin", comm::WaitPolicy::spin}, {"sleep", comm::WaitPolicy::sleep}, {"auto", std::nullopt}};

template <typename E, size_t N>
const char* name_of(const Choice<E> (&table)[N], const E& v) {
  for (const auto& c : table)
    if (c.value == v) return c.name;
  return "?";
}

// The enum `text` names; a text that names none is a UsageError naming the key:
// "option 'mode': 'x' is not allreduce, ps or hybrid".
template <typename E, size_t N>
E parse_choice(const Choice<E> (&table)[N], const char* key, const std::string& text) {
  for (const auto& c : table)
    if (text == c.name) return c.value;
  std::string names;
  for (size_t i = 0; i < N; ++i) names += std::string(i == 0 ? "" : i + 1 == N ? " or " : ", ") + table[i].name;
  DT_USAGE("option '", key, "': '", text, "' is not ", names);
}

struct Options {
  po::options_description desc{"dtrain train options (job-file keys are the same names)"};
  std::string mean, std, lr_milestones;
  // The enum-valued keys as written; validate() parses them into the TrainConfig.
  std::string device, lr_schedule, mode, wait_policy, on_nonfinite, augment, rrc_scale, rrc_ratio, precision;
  Options(TrainConfig& c)
      : device(device_name(c.device)), lr_schedule(lr_schedule_name(c.lr_schedule)), mode(comm::mode_name(c.mode)),
        wait_policy(wait_policy_option(c.wait_policy)), on_nonfinite(nonfinite_policy_name(c.on_nonfinite)),
        augment(io::crop_mode_name(c.augment)), rrc_scale(range_text(c.rrc_scale_min, c.rrc_scale_max)),
        rrc_ratio(range_text(c.rrc_ratio_min, c.rrc_ratio_max)), precision(layers::precision_name(c.precision)) {
    desc.add_options()
      ("help,h", "this help")
      ("job", po::value(&c.job), "job file (INI: key = value, keys as below)")
      ("model", def(&c.model), layers::model_list_text().c_str())
      ("train-data", po::value(&c.train_data), "training set, HDF5: raw (/images uint8 [N,H,W,C]) or jpeg (JPEG bytes + shapes, decoded by the loader threads) layout, /labels int32 [N] (docs/data-formats.md)")
      ("test-data", po::value(&c.test_data), "test set, HDF5 (raw or jpeg); scored after every epoch with the evaluation crop (see eval-resize)")
      ("device", def(&device), "cpu | cuda | cpu-staged (CPU kernels behind the cuda path's device memory and transfers; for tests)")
      ("reference-kernels", def(&c.reference_kernels), "use the plain-loop reference kernels (slow; for debugging; device cpu or cpu-staged)")
      ("workspace-mb", def(&c.workspace_mb), "cuda: cuDNN workspace budget per convolution layer, MiB (the fastest algorithm that fits is chosen)")
      ("tf32", def(&c.tf32), "cuda: allow TF32 tensor cores in convolutions and GEMMs (true | false)")
      ("precision", def(&precision), "fp32 | bf16: bf16 activations and weight copies in the convolutions and GEMMs, with fp32 master weights, gradients, optimizer state, batch-norm statistics and loss (mixed precision; cpu: a CPU with AVX512-BF16 or AMX, and a warning at start where bf16 measures slower than fp32 — AVX512-BF16 where AMX is absent or hidden, e.g. a VM on Sapphire/Emerald Rapids; cuda: compute capability 8.0 or later, activations stay fp32 between layers)")
      ("threads", def(&c.threads), "compute threads per rank, at most 1024 (0: under Slurm the task's CPUs less the loader threads, else the rank's share of the CPUs it may run on)")
      ("minibatch", def(&c.minibatch), "images per worker per step")
      ("eval-minibatch", def(&c.eval_minibatch), "images per evaluation batch (0: minibatch)")
      ("epochs", def(&c.epochs), "passes over the training set")
      ("max-steps", def(&c.max_steps), "train this many steps (0: the epochs decide): the run is planned as this long, so the learning-rate schedule ends here too; a job trained in pieces by --max-steps and --resume is not the one long run")
      ("max-train-samples", def(&c.max_train_samples), "train on the first N samples only (0: all)")
      ("max-test-samples", def(&c.max_test_samples), "score the first N test samples only (0: all)")
      ("seed", def(&c.seed), "seed of initialisation, shuffling and dropout")
      ("lr", def(&c.lr), "base learning rate")
      ("lr-schedule", def(&lr_schedule), "constant | step | cosine")
      ("warmup-epochs", def(&c.warmup_epochs), "linear warm-up from 0.1·lr (Goyal et al. 2017)")
      ("lr-step-epochs", def(&c.lr_step_epochs), "step schedule: multiply by lr-gamma every this many epochs (0: not set)")
      ("lr-milestones", po::value(&lr_milestones), "step schedule, instead of lr-step-epochs: multiply by lr-gamma at each of these epochs, comma-separated and increasing (e.g. 30,60,80)")
      ("lr-gamma", def(&c.lr_gamma), "step schedule factor")
      ("momentum", def(&c.momentum), "SGD momentum")
      ("weight-decay", def(&c.weight_decay), "L2 weight decay")
      ("decay-bias-bn", def(&c.decay_bias_bn), "apply weight decay to biases and batch-norm parameters too")
      ("dropout", def(&c.dropout), "dropout probability (AlexNet variants)")
      ("loader-threads", def(&c.loader_threads), "prefetch threads per rank (0: under Slurm a quarter of the task's CPUs, all but one on a GPU, else cores / ranks)")
      ("loader-depth", def(&c.loader_depth), "minibatches prefetched ahead")
      ("augment", def(&augment), "training crop: none (the image as stored when it has the model's input size, else the evaluation crop; with augment-pad) | crop (AlexNet: shorter side resized to eval-resize, random input-size crop) | rrc (ResNet: random-resized crop, area rrc-scale, aspect rrc-ratio, resized to the input)")
      ("augment-pad", def(&c.augment_pad), "augment none: random crop after zero padding of this many pixels (0: off; raw images of the model's input size)")
      ("augment-flip", def(&c.augment_flip), "random horizontal flip (every augment mode; the recipes use it)")
      ("eval-resize", def(&c.eval_resize), "shorter side, pixels, an image is resized to before the evaluation's center crop and augment crop's random crop (0: round(input × 256/224): 256 for 224; an image of the input's size is taken whole)")
      ("rrc-scale", def(&rrc_scale), "augment rrc: range MIN,MAX of the crop's area fraction (torchvision: 0.08,1)")
      ("rrc-ratio", def(&rrc_ratio), "augment rrc: range MIN,MAX of the crop's aspect ratio w/h, drawn log-uniform (torchvision: 3/4,4/3)")
      ("dct-scaling", def(&c.dct_scaling), "jpeg: decode at 1/2, 1/4 or 1/8 size (TurboJPEG DCT scaling) when the crop is at least that many times the input")
      ("mean", po::value(&mean), "per-channel mean of pixel/255, comma-separated")
      ("std", po::value(&std), "per-channel standard deviation of pixel/255, comma-separated")
      ("mode", def(&mode), "gradient exchange: allreduce | ps | hybrid")
      ("ps", def(&c.ps), "parameter-server ranks (the last ranks of the job)")
      ("ranks-per-node", def(&c.ranks_per_node), "group workers into virtual nodes of K (0: real nodes); only hybrid mode's exchange uses nodes (K must divide the workers there): in allreduce and ps modes K is only recorded in the run record for dtrain report's model")
      ("bucket-mb", def(&c.bucket_mb), "allreduce bucket size, MiB")
      ("max-chunk-elems", def(&c.max_chunk_elems), "largest single transfer, elements (at least 1024)")
      ("wait-policy", def(&wait_policy), "how ranks wait for messages: spin | sleep | auto (sleep when the node's ranks × threads exceed its cores)")
      ("comm-timeout", def(&c.comm_timeout), "seconds one step's gradient exchange may take, not counting a time the job was suspended, before the job is aborted as stalled (0: wait forever); evaluation and checkpoints are covered by --heartbeat-timeout only")
      ("heartbeat-timeout", def(&c.heartbeat_timeout), "seconds without a heartbeat from a rank (sent every second, whatever it computes) before the job is ended naming that rank: a killed, stopped or frozen process, whatever the job is doing (0: off; a rank stalled outside the gradient exchange can then hang the job)")
      ("metrics", def(&c.metrics), "JSON Lines metrics file (rank 0): auto = metrics.jsonl in the run folder; \"\" = none; a file that exists is refused unless --overwrite true")
      ("log-interval", def(&c.log_interval), "steps between metric lines")
      ("save-params", def(&c.save_params), "the final parameters, HDF5: auto = params.h5 in the run folder; \"\" = none; a file that exists is refused unless --overwrite true")
      ("runs-dir", def(&c.runs_dir), "parent of the run folders: each run writes into RUNS_DIR/RUN-NAME/N/ (N = 1, 2, …; RUNS_DIR/RUN-NAME/latest → the newest)")
      ("run-name", def(&c.run_name), "the run folder's name (default: the job file's name without .ini, else train)")
      ("overwrite", def(&c.overwrite), "allow an explicit --metrics / --save-params / --timeline file that exists to be replaced")
      ("metrics-append", def(&c.metrics_append), "an explicit --metrics file that exists is appended to, not refused or replaced (true | false): every start of one requeued batch job writes one file (slurm/train.sbatch)")
      ("timeline", def(&c.timeline), "a Chrome-trace / Perfetto JSON of every rank's steps, compute, loader waits, transfers and server updates (docs/timeline.md): \"\" = off; auto = timeline.json in the run folder; a file that exists is refused unless --overwrite true")
      ("timeline-steps", def(&c.timeline_steps), "--timeline records the first N steps of the run (from the resume point on a resumed run)")
      ("checkpoint-dir", def(&c.checkpoint_dir), "folder of this job's checkpoints (\"\": none); keep it the same across restarts of the job (docs/reliability.md)")
      ("checkpoint-every-steps", def(&c.checkpoint_every_steps), "a checkpoint every N steps (0: not by steps)")
      ("checkpoint-every-s", def(&c.checkpoint_every_s), "a checkpoint when this many seconds passed since the last one (0: not by time)")
      ("checkpoint-epoch-end", def(&c.checkpoint_epoch_end), "a checkpoint at the end of every epoch (true | false)")
      ("checkpoint-keep", def(&c.checkpoint_keep), "complete checkpoints kept in the folder (the oldest are removed)")
      ("resume", def(&c.resume), "none | auto (the newest valid checkpoint of --checkpoint-dir, else a fresh start) | PATH of a checkpoint file")
      ("on-nonfinite", def(&on_nonfinite), "a step whose summed gradient holds an Inf or NaN: skip (no rank updates; see max-nonfinite-skips) | abort")
      ("max-nonfinite-skips", def(&c.max_nonfinite_skips), "skip: this many such steps in a row end the run with an error")
      ("clip-grad-norm", def(&c.clip_grad_norm), "> 0: scale the global gradient down to this L2 norm when it is larger (0: off)")
      ("compute-stand-in-ms", def(&c.compute_stand_in_ms), "> 0: each worker spends this many ms per step instead of computing forward and backward, while the exchange moves the model's whole gradient and parameter arena as backward would (studies of clusters this machine lacks; no test-data, checkpoint-dir or resume; 0: off)");
  }
};

// Checks every key in a fixed order (the first failure is the message) and
// parses the enum-valued ones (o's strings) into c.
void validate(TrainConfig& c, const Options& o) {
  // Numbers in the message as shortest round-trip text (4096.0000000001, not
  // 4096, which would read as inside the range it is refused for).
  auto text = [](auto&& x) -> decltype(auto) {
    if constexpr (std::is_floating_point_v<std::decay_t<decltype(x)>>) return format::shortest(x);
    else return std::forward<decltype(x)>(x);
  };
  // Also for tune, which writes it into a job file (engine/run_folder.cpp checks the name train makes).
  if (c.run_name.size() > NAME_MAX)
    DT_USAGE("option 'run-name': '", visible(c.run_name.substr(0, 40)), "…' is ", c.run_name.size(),
             " bytes long, more than the ", NAME_MAX, " a folder name may have");
  auto need = [&](bool ok, const char* key, auto&&... why) {
    if (!ok) DT_USAGE("option '", key, "': ", text(why)...);
  };
  if (c.train_data.empty() && c.job.empty())
    DT_USAGE("no job: give a job file (--job jobs/fashion_lenet.ini) or at least --train-data FILE; "
             "`dtrain train --help` lists every option");
  need(!c.train_data.empty(), "train-data", "is required (an HDF5 dataset; see `dtrain data`)");
  c.device = parse_choice(kDevices, "device", o.device);
#ifndef DTRAIN_HAVE_CUDA
  need(c.device != Device::cuda, "device", "cuda: this dtrain was built without the CUDA backend (configure with "
       "-DDTRAIN_CUDA=ON on a machine with the CUDA toolkit, cuDNN and NCCL); use --device cpu");
#endif
  need(!c.reference_kernels || c.device != Device::cuda, "reference-kernels",
       "true runs the CPU reference kernels and needs device cpu or cpu-staged, not cuda");
  c.precision = layers::parse_precision(o.precision);
  need(c.workspace_mb >= 0 && c.workspace_mb <= (int64_t{1} << 20), "workspace-mb",
       "must be a number of MiB in [0, 1048576], got ", c.workspace_mb);
  need(c.minibatch > 0, "minibatch", "must be > 0, got ", c.minibatch);
  need(c.eval_minibatch >= 0, "eval-minibatch", "must be >= 0, got ", c.eval_minibatch);
  need(c.epochs > 0, "epochs", "must be > 0, got ", c.epochs);
  need(c.max_steps >= 0, "max-steps", "must be >= 0");
  need(c.max_train_samples >= 0, "max-train-samples", "must be >= 0");
  need(c.max_test_samples >= 0, "max-test-samples", "must be >= 0");
  need(c.threads >= 0 && c.threads <= kMaxThreads, "threads", "must be in [0, ", kMaxThreads, "], got ", c.threads);
  need(c.minibatch <= kMaxMinibatch, "minibatch", "must be <= ", kMaxMinibatch, ", got ", c.minibatch);
  need(c.eval_minibatch <= kMaxMinibatch, "eval-minibatch", "must be <= ", kMaxMinibatch, ", got ", c.eval_minibatch);
  need(c.seed >= 0, "seed", "must be >= 0, got ", c.seed);
  need(c.loader_threads >= 0 && c.loader_threads <= kMaxLoaderThreads, "loader-threads", "must be in [0, ", kMaxLoaderThreads,
       "], got ", c.loader_threads);
  need(c.loader_depth >= 1 && c.loader_depth <= kMaxLoaderDepth, "loader-depth", "must be in [1, ", kMaxLoaderDepth, "], got ",
       c.loader_depth);
  need(c.augment_pad >= 0 && c.augment_pad <= 64, "augment-pad", "must be in [0, 64], got ", c.augment_pad);
  c.augment = parse_choice(kCrops, "augment", o.augment);
  need(c.augment_pad == 0 || c.augment == io::CropMode::none, "augment-pad",
       "padded crops work with augment none only (augment is ", io::crop_mode_name(c.augment), ")");
  need(c.eval_resize >= 0 && c.eval_resize <= 8192, "eval-resize", "must be in [0, 8192] (the converter's largest S), got ", c.eval_resize);
  parse_range("rrc-scale", o.rrc_scale, &c.rrc_scale_min, &c.rrc_scale_max);
  need(c.rrc_scale_min > 0 && c.rrc_scale_max <= 1, "rrc-scale", "must lie in (0, 1], got ", o.rrc_scale);
  parse_range("rrc-ratio", o.rrc_ratio, &c.rrc_ratio_min, &c.rrc_ratio_max);
  need(c.rrc_ratio_min > 0 && c.rrc_ratio_max <= 100, "rrc-ratio", "must lie in (0, 100], got ", o.rrc_ratio);
  need(std::isfinite(c.lr) && c.lr > 0.0f, "lr", "must be a finite number > 0, got ", c.lr);
  need(std::isfinite(c.lr_gamma) && c.lr_gamma > 0.0f && c.lr_gamma <= 1.0f, "lr-gamma", "must be in (0, 1], got ", c.lr_gamma);
  need(c.momentum >= 0.0f && c.momentum < 1.0f, "momentum", "must be in [0, 1), got ", c.momentum);
  need(std::isfinite(c.weight_decay) && c.weight_decay >= 0.0f, "weight-decay", "must be a finite number >= 0, got ", c.weight_decay);
  need(c.dropout >= 0.0f && c.dropout < 1.0f, "dropout", "must be in [0, 1), got ", c.dropout);
  need(std::isfinite(c.warmup_epochs) && c.warmup_epochs >= 0.0f && c.warmup_epochs <= c.epochs, "warmup-epochs",
       "must be in [0, epochs = ", c.epochs, "], got ", c.warmup_epochs);
  need(std::isfinite(c.lr_step_epochs) && c.lr_step_epochs >= 0.0f && c.lr_step_epochs <= 1e6, "lr-step-epochs",
       "must be a finite number >= 0, got ", c.lr_step_epochs);
  // At least 1 byte (the exchange's own bound, comm/exchange.cpp), checked
  // here so that it is refused before the run folder is made.
  need(std::isfinite(c.bucket_mb) && c.bucket_mb * 1048576.0 >= 1.0 && c.bucket_mb <= 4096, "bucket-mb",
       "must be a number of MiB from 1 byte (9.5e-07) to 4096, got ", c.bucket_mb);
  c.wait_policy = parse_choice(kWaits, "wait-policy", o.wait_policy);
  need(std::isfinite(c.comm_timeout) && c.comm_timeout >= 0, "comm-timeout", "must be a number of seconds >= 0, got ",
       c.comm_timeout);
  need(std::isfinite(c.heartbeat_timeout) && (c.heartbeat_timeout == 0 || c.heartbeat_timeout > comm::kHeartbeatPeriodS),
       "heartbeat-timeout", "must be 0 (off) or more than the heartbeat period of ",
       format::shortest(comm::kHeartbeatPeriodS), " s, got ", c.heartbeat_timeout);
  c.lr_schedule = parse_choice(kSchedules, "lr-schedule", o.lr_schedule);
  for (size_t i = 0; i < c.lr_milestones.size(); ++i) {
    const float m = c.lr_milestones[i];
    need(std::isfinite(m) && m > 0.0f && m <= 1e6f, "lr-milestones", "every epoch must be a finite number in (0, 1e6], got ",
         format::shortest(m));
    need(i == 0 || m > c.lr_milestones[i - 1], "lr-milestones", "must be increasing, got '", o.lr_milestones, "'");
  }
  // The step schedule takes exactly one of the two (0 and "" mean "not set").
  const bool every = c.lr_step_epochs > 0.0f, at = !c.lr_milestones.empty();
  need(c.lr_schedule != LrKind::step || !(every && at), "lr-milestones",
       "'", o.lr_milestones, "' and lr-step-epochs = ", format::shortest(c.lr_step_epochs),
       " are both set; lr-schedule = step takes one of them (drop the other with --lr-milestones \"\" or --lr-step-epochs 0)");
  need(c.lr_schedule != LrKind::step || every || at, "lr-step-epochs",
       "must be > 0 with lr-schedule = step, or give lr-milestones (epochs, e.g. 30,60,80)");
  need(c.log_interval > 0, "log-interval", "must be > 0, got ", c.log_interval);
  need(c.timeline_steps >= 1 && c.timeline_steps <= 1000000, "timeline-steps", "must be in [1, 1000000], got ",
       c.timeline_steps);
  c.mode = parse_choice(kModes, "mode", o.mode);
  need(c.ps >= 0, "ps", "must be >= 0, got ", c.ps);
  const bool allreduce = c.mode == comm::Mode::allreduce;
  need(allreduce ? c.ps == 0 : c.ps > 0, "ps",
       allreduce ? "must be 0 in allreduce mode (use --mode ps or hybrid)"
                             : "must be > 0 in ps and hybrid modes (the number of parameter-server ranks, the last "
                               "of the job's ranks; e.g. --ps 1)");
  need(c.ranks_per_node >= 0, "ranks-per-node", "must be >= 0, got ", c.ranks_per_node);
  // At least 1024 (4 KiB): below it each transfer is all overhead, and with 1
  // a ps server drowned in one-element messages missed the heartbeats long
  // enough to have a live worker declared dead (a helper's finding, 2026-12-04).
  need(c.max_chunk_elems >= 1024 && c.max_chunk_elems < (int64_t{1} << 31), "max-chunk-elems",
       "must be in [1024, 2^31), got ", c.max_chunk_elems);
  need(c.checkpoint_every_steps >= 0, "checkpoint-every-steps", "must be >= 0, got ", c.checkpoint_every_steps);
  need(std::isfinite(c.checkpoint_every_s) && c.checkpoint_every_s >= 0, "checkpoint-every-s",
       "must be a number of seconds >= 0, got ", c.checkpoint_every_s);
  need(c.checkpoint_keep >= 1 && c.checkpoint_keep <= 1000, "checkpoint-keep", "must be in [1, 1000], got ",
       c.checkpoint_keep);
  need(!c.resume.empty(), "resume", "must be none, auto or the path of a checkpoint file");
  need(c.resume != "auto" || !c.checkpoint_dir.empty(), "resume",
       "auto looks in --checkpoint-dir, which is not set (give --checkpoint-dir, or a checkpoint file)");
  c.on_nonfinite = parse_choice(kNonfinite, "on-nonfinite", o.on_nonfinite);
  need(c.max_nonfinite_skips >= 1, "max-nonfinite-skips", "must be >= 1, got ", c.max_nonfinite_skips);
  need(std::isfinite(c.clip_grad_norm) && c.clip_grad_norm >= 0, "clip-grad-norm", "must be a finite number >= 0, got ",
       c.clip_grad_norm);
  need(std::isfinite(c.compute_stand_in_ms) && c.compute_stand_in_ms >= 0 && c.compute_stand_in_ms <= 3.6e6,
       "compute-stand-in-ms", "must be a number of milliseconds in [0, 3600000], got ", c.compute_stand_in_ms);
  if (c.compute_stand_in_ms > 0) {
    const std::string x = format::shortest(c.compute_stand_in_ms);
    need(c.test_data.empty(), "compute-stand-in-ms", x, " computes no forward pass, so option 'test-data' ('",
         c.test_data, "') cannot be scored: give --test-data \"\" (or --compute-stand-in-ms 0)");
    need(c.checkpoint_dir.empty(), "compute-stand-in-ms", x, " trains no model, so option 'checkpoint-dir' ('",
         c.checkpoint_dir, "') would save checkpoints a real run could resume from: give --checkpoint-dir \"\"");
    need(c.resume == "none", "compute-stand-in-ms", x, " trains no model: option 'resume' must be none, got '",
         c.resume, "'");
  }
  for (float s : c.std) need(std::isfinite(s) && s > 0.0f, "std", "every value must be a finite number > 0, got ", s);
  for (float m : c.mean) need(std::isfinite(m), "mean", "every value must be a finite number, got ", m);
}

}  // namespace

const char* device_name(Device d) { return name_of(kDevices, d); }
const char* lr_schedule_name(layers::LrSchedule::Kind k) { return name_of(kSchedules, k); }
const char* wait_policy_option(const std::optional<comm::WaitPolicy>& p) { return name_of(kWaits, p); }
const char* nonfinite_policy_name(NonfinitePolicy p) { return name_of(kNonfinite, p); }

std::string range_text(double lo, double hi) {
  auto text = [](double v) {
    if (std::abs(v - 3.0 / 4.0) < 1e-12) return std::string("3/4");
    if (std::abs(v - 4.0 / 3.0) < 1e-12) return std::string("4/3");
    return format::shortest(v);
  };
  return text(lo) + "," + text(hi);
}

std::string train_help() {
  TrainConfig c;
  Options o(c);
  std::ostringstream os;
  os << "usage: dtrain train --job FILE [--key value ...]\n\n" << o.desc;
  return os.str();
}

std::string nearest_train_option(const std::string& name) {
  TrainConfig c;
  Options o(c);
  return nearest_option(name, o.desc);
}

bool parse_train_args(const std::vector<std::string>& args, TrainConfig& cfg) {
  Options o(cfg);
  po::variables_map vm;
  // Per key given: where its winning value was written ("command line: " or
  // "job file 'PATH': "), the prefix of validate()'s message about it.
  std::map<std::string, std::string>& origin = cfg.origin;
  origin.clear();
  try {
    const po::parsed_options parsed = po::command_line_parser(args).options(o.desc).style(option_style()).run();
    refuse_option_like_values(parsed, "command line: ");
    refuse_bad_numbers(parsed, o.desc, "command line: ");
    refuse_control_characters(parsed, "command line: ");
    for (const auto& opt : parsed.options) origin.emplace(opt.string_key, "command line: ");
    po::store(parsed, vm);
  } catch (const po::error& e) {
    rethrow_usage(e, "command line: ", o.desc);
  }
  if (vm.count("help")) return false;
  if (vm.count("job")) {
    std::string path = vm["job"].as<std::string>();
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      DT_USAGE("job file ", format::missing_path(path), " does not exist or is not a file");
    std::ifstream file(path);
    if (!file) DT_USAGE("job file '", path, "' cannot be opened");
    std::stringstream text;
    text << file.rdbuf();
    std::string body = text.str();
    // A byte-order mark (Windows editors save one) would make the first key
    // read as unknown with the mark invisible in the message.
    if (body.starts_with("\xEF\xBB\xBF")) body.erase(0, 3);
    const auto line_of = [&](size_t at) { return 1 + std::count(body.begin(), body.begin() + at, '\n'); };
    if (body.starts_with(std::string("\xFF\xFE\0\0", 4)) || body.starts_with(std::string("\0\0\xFE\xFF", 4)))
      DT_USAGE("job file '", path, "' is UTF-32 (it starts with a UTF-32 byte-order mark): save it as UTF-8");
    if (body.starts_with("\xFF\xFE") || body.starts_with("\xFE\xFF"))
      DT_USAGE("job file '", path, "' is UTF-16 (it starts with a UTF-16 byte-order mark): save it as UTF-8");
    // A job file is text. A control character (a NUL cut a path short and made
    // the run folder's mkdir loop forever; an escape sequence reached the
    // terminal; a binary file was called one with old Mac line endings).
    if (const auto c = std::find_if(body.begin(), body.end(),
                                    [](char ch) { return ch != '\r' && ch != '\n' && is_control_character(ch); });
        c != body.end()) {
      const size_t at = static_cast<size_t>(c - body.begin());
      const size_t from = body.rfind('\n', at) == std::string::npos ? 0 : body.rfind('\n', at) + 1;
      size_t to = std::min(body.find('\n', at), body.size());
      if (to > from && body[to - 1] == '\r') --to;  // a CRLF line is shown without its CR
      DT_USAGE("job file '", path, "': line ", line_of(at), " holds the control character ",
               visible(std::string(1, *c)), ": '", shown_line(body.substr(from, to - from)),
               "' (a job file is text: key = value lines",
               body.find('\0') != std::string::npos ? "; this file holds NUL bytes: is it a job file?)" : ")");
    }
    // A carriage return not followed by a line feed (old Mac line endings):
    // the whole file was one line to Boost, the first key's value ran on
    // through the rest and the other keys were lost.
    if (const size_t cr = body.find('\r'); cr != std::string::npos)
      for (size_t at = cr; at != std::string::npos; at = body.find('\r', at + 1))
        if (at + 1 == body.size() || body[at + 1] != '\n')
          DT_USAGE("job file '", path, "': line ", line_of(at), " has a lone carriage return (\\r",
                   body.find('\n') == std::string::npos ? ", old Mac line endings): save the file with \\n or \\r\\n line endings"
                                                         : " inside a line): remove it");
    // Boost reads "[name]" as a section and its keys as "name.key", which
    // would be refused as unknown keys without saying why. A section is what
    // Boost takes for one: a line that is "[…]" once trimmed.
    {
      std::istringstream lines(body);
      std::string line;
      for (size_t no = 1; std::getline(lines, line); ++no) {
        line.erase(std::min(line.size(), line.find('#')));  // Boost drops a comment first ("[train] # c")
        line.erase(0, line.find_first_not_of(" \t\r"));
        line.erase(line.find_last_not_of(" \t\r") + 1);
        if (line.starts_with('[') && line.ends_with(']'))
          DT_USAGE("job file '", path, "': line ", no, ": '", shown_line(line),
                   "' is a section header; job files have no sections: give every key as key = value, "
                   "without the header");
        // What Boost calls "an invalid line" (no '='), with its number and
        // its invisible bytes shown ('\f[x]' printed a raw form feed).
        if (!line.empty() && line.find('=') == std::string::npos)
          DT_USAGE("job file '", path, "': line ", no, ": '", shown_line(line),
                   "' is not key = value (a comment starts with #)");
        if (line.starts_with('='))  // Boost said only "unrecognised option" (with an empty name)
          DT_USAGE("job file '", path, "': line ", no, ": '", shown_line(line), "' has no key before '='");
      }
    }
    std::istringstream in(body);
    try {
      const po::parsed_options parsed = po::parse_config_file(in, o.desc, /*allow_unregistered=*/false);
      refuse_bad_numbers(parsed, o.desc, "job file '" + path + "': ");
      for (const auto& opt : parsed.options)
        if (opt.string_key == "job")
          DT_USAGE("job file '", path, "': key 'job': a job file cannot name another one (there are no includes); "
                   "give the other file's keys here, or that file with --job");
      // Every value of the file is read, also one the command line overrides
      // (po::store skips a key already stored, unread: `lr = abc` passed
      // under --lr 0.01); semantic checks (validate) see the winning values.
      po::variables_map file_only;
      po::store(parsed, file_only);
      // Values already on the command line are kept: the command line wins.
      for (const auto& opt : parsed.options) origin.emplace(opt.string_key, "job file '" + path + "': ");
      po::store(parsed, vm);
    } catch (const po::error& e) {
      rethrow_usage(e, "job file '" + path + "': ", o.desc, /*job_file=*/true);
    }
  }
  try {
    po::notify(vm);
  } catch (const po::error& e) {
    rethrow_usage(e, "", o.desc);
  }
  // Every message of these begins "option 'KEY': " (the one without a key,
  // "no job", has no place to name); KEY's origin goes in front, so
  // `momentum = 1.5` in a job file names the file.
  try {
    cfg.mean = parse_floats("mean", o.mean);
    cfg.std = parse_floats("std", o.std);
    cfg.lr_milestones = parse_floats("lr-milestones", o.lr_milestones);
    validate(cfg, o);
  } catch (const UsageError& e) {
    throw UsageError(with_origin(cfg, e.what()));
  }
  return true;
}

std::string with_origin(const TrainConfig& cfg, const std::string& m) {
  const std::string lead = "option '";
  const size_t end = m.starts_with(lead) ? m.find('\'', lead.size()) : std::string::npos;
  const auto at = end == std::string::npos ? cfg.origin.end() : cfg.origin.find(m.substr(lead.size(), end - lead.size()));
  return at == cfg.origin.end() ? m : at->second + m;
}

}  // namespace dtrain::engine
