// engine/tune.cpp — `dtrain tune`: measure T_C(X_mini), memory and links on
// this machine, choose the minibatch (the knee) and the number of parameter
// servers for a cluster of n nodes × g workers (GPUs or CPU workers) from the
// model of DESIGN.md §4, print the predictions for G = 1 … n·g on that cluster
// and on this machine (engine/predict.hpp), and write a tuned job file (plus
// the profile and both tables as JSON for `dtrain report`).
//
//   [mpirun -np R] dtrain tune --job J --nodes n --workers-per-node g   (alias --gpus-per-node)
//       [--link-gbps B] [--device-memory-gb M] [--target-efficiency a] [--out tuned.ini]
//       [--candidates 16,32,64,128] [--profile-steps 5] [--key value ...]
// Other --key value pairs are job options (as for `dtrain train`).
#include <mpi.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "core/error.hpp"
#include "core/format.hpp"
#include "engine/commands.hpp"
#include "engine/config.hpp"
#include "engine/options.hpp"
#include "engine/tune.hpp"

namespace po = boost::program_options;

namespace dtrain::engine {

namespace {

// The minibatch sizes of --candidates: positive, at most `most` (train's
// limit: a tuned job train refuses is no answer), each once (one was profiled
// twice). Items are quoted with their invisible bytes as \xNN.
std::vector<int> parse_ints(const std::string& key, const std::string& s, int most) {
  std::vector<int> v;
  if (trim_blanks(s).empty()) DT_USAGE("dtrain tune: option '", key, "' is empty");
  // "16, 32" in a job file or quoted; a last empty item ("16,32,") is one too.
  for (const std::string& item : list_items(s)) {
    if (item.empty())
      DT_USAGE("dtrain tune: option '", key, "': '", visible(s), "' has an empty item: give comma-separated integers");
    std::string why = int_problem(item);
    if (why.empty() && std::stoi(item) < 1) why = "which is not positive";
    if (why.empty() && std::stoi(item) > most) why = "more than " + std::to_string(most) + ", the largest minibatch";
    if (why.empty() && std::find(v.begin(), v.end(), std::stoi(item)) != v.end()) why = "which is given twice";
    if (!why.empty())
      DT_USAGE("dtrain tune: option '", key, "': '", visible(item), "'", item == s ? "" : " in '" + visible(s) + "'", ", ",
               why);
    v.push_back(std::stoi(item));
  }
  return v;
}

}  // namespace

std::string job_file_text(const TrainConfig& c) {
  // Numbers shortest round-trip ("0.05", not "0.0500000007"), booleans true/false
  // (core/format.hpp). Outputs (metrics, save-params) are left out: the tuned
  // job is run again and again, and each run then writes its own run folder.
  using format::boolean;
  using format::shortest;
  std::ostringstream o;
  auto kv = [&](const char* k, const std::string& v) { o << k << " = " << v << "\n"; };
  auto num = [&](const char* k, auto v) { kv(k, shortest(v)); };
  auto str = [&](const char* k, const std::string& v) {
    if (!v.empty()) kv(k, v);
  };
  auto list = [](const std::vector<float>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) s += ',';
      s += shortest(v[i]);
    }
    return s;
  };
  kv("model", c.model);
  str("train-data", c.train_data);
  str("test-data", c.test_data);
  kv("device", device_name(c.device));
  kv("reference-kernels", boolean(c.reference_kernels));
  num("workspace-mb", c.workspace_mb);
  kv("tf32", boolean(c.tf32));
  if (c.precision != layers::DType::f32) kv("precision", layers::precision_name(c.precision));  // omitted at fp32 (job hashes)
  num("threads", c.threads);
  num("minibatch", c.minibatch);
  num("eval-minibatch", c.eval_minibatch);
  num("epochs", c.epochs);
  num("max-steps", c.max_steps);
  num("max-train-samples", c.max_train_samples);
  num("max-test-samples", c.max_test_samples);
  num("seed", c.seed);
  num("lr", c.lr);
  kv("lr-schedule", lr_schedule_name(c.lr_schedule));
  num("warmup-epochs", c.warmup_epochs);
  num("lr-step-epochs", c.lr_step_epochs);
  str("lr-milestones", list(c.lr_milestones));  // omitted when empty (the job hash of other jobs is unchanged)
  num("lr-gamma", c.lr_gamma);
  num("momentum", c.momentum);
  num("weight-decay", c.weight_decay);
  kv("decay-bias-bn", boolean(c.decay_bias_bn));
  num("dropout", c.dropout);
  num("loader-threads", c.loader_threads);
  num("loader-depth", c.loader_depth);
  kv("augment", io::crop_mode_name(c.augment));
  num("augment-pad", c.augment_pad);
  kv("augment-flip", boolean(c.augment_flip));
  num("eval-resize", c.eval_resize);
  kv("rrc-scale", range_text(c.rrc_scale_min, c.rrc_scale_max));
  kv("rrc-ratio", range_text(c.rrc_ratio_min, c.rrc_ratio_max));
  kv("dct-scaling", boolean(c.dct_scaling));
  str("mean", list(c.mean));
  str("std", list(c.std));
  kv("mode", comm::mode_name(c.mode));
  num("ps", c.ps);
  num("ranks-per-node", c.ranks_per_node);
  num("bucket-mb", c.bucket_mb);
  num("max-chunk-elems", c.max_chunk_elems);
  kv("wait-policy", wait_policy_option(c.wait_policy));
  num("comm-timeout", c.comm_timeout);
  num("heartbeat-timeout", c.heartbeat_timeout);
  num("log-interval", c.log_interval);
  str("checkpoint-dir", c.checkpoint_dir);
  num("checkpoint-every-steps", c.checkpoint_every_steps);
  num("checkpoint-every-s", c.checkpoint_every_s);
  kv("checkpoint-epoch-end", boolean(c.checkpoint_epoch_end));
  num("checkpoint-keep", c.checkpoint_keep);
  kv("on-nonfinite", nonfinite_policy_name(c.on_nonfinite));
  num("max-nonfinite-skips", c.max_nonfinite_skips);
  num("clip-grad-norm", c.clip_grad_norm);
  if (c.compute_stand_in_ms > 0) num("compute-stand-in-ms", c.compute_stand_in_ms);  // omitted when off (other jobs' hash unchanged)
  return o.str();
}

int cmd_tune(const std::vector<std::string>& args) {
  TuneOptions t;
  std::string candidates = "16,32,64,128,256", modes = "ps,hybrid,allreduce";
  po::options_description desc(
      "dtrain tune --job J --nodes n --workers-per-node g [--link-gbps B] [--device-memory-gb M]\n"
      "            [--target-efficiency a] [--out tuned.ini] [--key value ...]  (other keys: job options)");
  using format::shortest;
  auto dflt = [](auto& var, auto v) { return po::value(&var)->default_value(v, shortest(v)); };
  int gpus_alias = 0;  // --gpus-per-node: the same as --workers-per-node
  desc.add_options()("help,h", "this help")("nodes", dflt(t.nodes, 1), "nodes of the target cluster")(
      "workers-per-node", dflt(t.workers_per_node, 1), "workers per node of the target cluster (GPUs, or CPU workers)")(
      "gpus-per-node", po::value(&gpus_alias), "alias of --workers-per-node")(
      "link-gbps", dflt(t.link_gbps, 0.0), "network link, Gb/s (0: measured by ping-pong, else 10)")(
      "intra-gbps", dflt(t.intra_gbps, 0.0), "link inside a node, Gb/s (0: measured, else = link)")(
      "latency-us", dflt(t.latency_us, -1.0), "per-message latency, µs (−1: measured, else 5)")(
      "device-memory-gb", dflt(t.memory_gb, 0.0), "memory per worker, GB (0: host RAM / workers per node)")(
      "target-efficiency", dflt(t.target_efficiency, 0.8), "α* for the largest useful G")(
      "knee", dflt(t.knee, 0.05), "minibatch: smallest within this fraction of the best images/s")(
      "candidates", po::value(&candidates)->default_value(candidates),
      "minibatch sizes to profile (comma-separated, each once, at most 65536, a global batch the training set fills)")(
      "profile-steps", dflt(t.profile_steps, 5), "measured steps per candidate (after one warm-up)")(
      "modes", po::value(&modes)->default_value(modes),
      "exchange modes the tuned job may take (comma-separated): the one with the best predicted speedup on the "
      "cluster; hybrid only with nodes and workers-per-node > 1")(
      "t-c-ms", dflt(t.t_c_ms, 0.0), "what-if: T_C per step (ms) at the job's minibatch, e.g. a GPU's; 0: measure")(
      "t-u-ms", dflt(t.t_u_ms, 0.0), "with --t-c-ms: a worker's local update per step (ms), added to T_C in allreduce mode; "
                                     "−1: measure the SGD update here, on every tune rank at once (for compute stand-in "
                                     "runs on these cores); 0: none (a GPU's is ~1 ms)")(
      "base-batch", dflt(t.base_batch, 0), "global batch the job's lr is for (0: the job's minibatch)")(
      "max-lr-scale", dflt(t.max_lr_scale, 4.0), "largest factor the linear scaling rule may multiply the lr by")(
      "out", po::value(&t.out)->default_value("tuned.ini"), "tuned job file (the profile goes to OUT.profile.json); refused if either exists")(
      "overwrite", po::value(&t.overwrite)->default_value(false, "false"), "replace an existing OUT and OUT.profile.json");
  po::variables_map vm;
  std::vector<std::string> job_args;
  try {
    auto parsed = po::command_line_parser(args).options(desc).style(option_style()).allow_unregistered().run();
    // Tune's own numbers as train's (the job's are checked when the job is read):
    // `--link-gbps 1e-400` was read as 0, "measure".
    refuse_bad_numbers(parsed, desc, "dtrain tune: ");
    refuse_control_characters(parsed, "dtrain tune: ");  // --out $'t\e.ini' made such files after profiling
    po::store(parsed, vm);
    po::notify(vm);
    job_args = po::collect_unrecognized(parsed.options, po::include_positional);
  } catch (const po::error& e) {
    rethrow_usage(e, "dtrain tune: ", desc);
  }
  if (vm.count("help")) {
    std::cout << desc;
    return kExitOk;
  }
  t.candidates = parse_ints("candidates", candidates, kMaxMinibatch);
  t.modes.clear();
  for (const std::string& m : list_items(modes)) {
    if (m.empty()) DT_USAGE("dtrain tune: option 'modes': '", visible(modes), "' has an empty item (ps, hybrid, allreduce: one or more)");
    comm::Mode mode;
    try {
      mode = comm::parse_mode(m);
    } catch (const UsageError&) {
      DT_USAGE("dtrain tune: option 'modes': '", visible(m), "' in '", visible(modes), "' is not ps, hybrid or allreduce");
    }
    if (std::find(t.modes.begin(), t.modes.end(), mode) != t.modes.end())
      DT_USAGE("dtrain tune: option 'modes': '", m, "' is named twice in '", visible(modes), "'");
    t.modes.push_back(mode);
  }
  if (t.modes.empty()) DT_USAGE("dtrain tune: option 'modes' is empty (ps, hybrid, allreduce: one or more)");
  if (t.out.empty()) DT_USAGE("dtrain tune: option 'out' is empty (the tuned job file)");  // it failed after profiling
  if (t.out.starts_with("--"))
    DT_USAGE("dtrain tune: option 'out' got the value '", visible(t.out),
             "', which looks like an option: was its value left empty (an unset shell variable)?");
  if (vm.count("gpus-per-node")) {
    if (!vm["workers-per-node"].defaulted() && gpus_alias != t.workers_per_node)
      DT_USAGE("dtrain tune: options 'workers-per-node' (", t.workers_per_node, ") and its alias 'gpus-per-node' (",
               gpus_alias, ") disagree");
    t.workers_per_node = gpus_alias;
  }
  if (t.nodes < 1 || t.workers_per_node < 1) DT_USAGE("dtrain tune: options 'nodes' and 'workers-per-node' must be ≥ 1");
  if (t.modes == std::vector<comm::Mode>{comm::Mode::hybrid} && t.nodes * int64_t{t.workers_per_node} > 1 &&
      !t.hybrid_possible())
    DT_USAGE("dtrain tune: option 'modes' = hybrid needs nodes and workers-per-node both > 1 (got ", t.nodes, " × ",
             t.workers_per_node, "); add ps or allreduce");
  if (!(t.target_efficiency > 0 && t.target_efficiency <= 1)) DT_USAGE("dtrain tune: option 'target-efficiency' must be in (0, 1]");
  if (t.profile_steps < 1) DT_USAGE("dtrain tune: option 'profile-steps' must be ≥ 1");
  if (static_cast<long long>(t.nodes) * t.workers_per_node > (1 << 20))
    DT_USAGE("dtrain tune: options 'nodes' × 'workers-per-node' = ", static_cast<long long>(t.nodes) * t.workers_per_node,
             " workers; at most 1048576");
  if (!(t.knee >= 0 && t.knee < 1)) DT_USAGE("dtrain tune: option 'knee' must be in [0, 1)");
  if (!(t.max_lr_scale >= 1)) DT_USAGE("dtrain tune: option 'max-lr-scale' must be ≥ 1");
  if (!(t.memory_gb >= 0)) DT_USAGE("dtrain tune: option 'device-memory-gb' must be ≥ 0");
  if (t.base_batch < 0) DT_USAGE("dtrain tune: option 'base-batch' must be ≥ 0");
  if (!std::isfinite(t.t_c_ms) || t.t_c_ms < 0 || t.t_c_ms > 3.6e6)  // 1e300 printed a 300-digit step
    DT_USAGE("dtrain tune: option 't-c-ms' must be a finite number of ms in [0, 3600000] (0: measure), got ", t.t_c_ms);
  if (!std::isfinite(t.link_gbps) || t.link_gbps < 0)
    DT_USAGE("dtrain tune: option 'link-gbps' must be > 0 (Gb/s), or 0 (measure), got ", t.link_gbps);
  if (!std::isfinite(t.intra_gbps) || t.intra_gbps < 0)  // -5 and nan were read as 0, "measure"
    DT_USAGE("dtrain tune: option 'intra-gbps' must be > 0 (Gb/s), or 0 (measure, else = link), got ", t.intra_gbps);
  if (!std::isfinite(t.latency_us) || !(t.latency_us >= 0 || t.latency_us == -1))
    DT_USAGE("dtrain tune: option 'latency-us' must be ≥ 0 (µs), or −1 (measure), got ", t.latency_us);
  if (!std::isfinite(t.t_u_ms) || t.t_u_ms > 3.6e6)
    DT_USAGE("dtrain tune: option 't-u-ms' must be a finite number of ms, at most 3600000, got ", t.t_u_ms);
  if (t.t_u_ms != 0 && !(t.t_c_ms > 0))
    DT_USAGE("dtrain tune: option 't-u-ms' needs 't-c-ms' (a measured T_C already includes the update)");
  if (!(t.t_u_ms >= 0 || t.t_u_ms == -1)) DT_USAGE("dtrain tune: option 't-u-ms' must be ≥ 0, or −1 (measure)");
  // Options tune does not know go to the job; one that neither knows is named
  // with the nearest of both (tune's own first).
  for (const std::string& a : job_args) {
    if (a.rfind("--", 0) != 0) continue;
    std::string name = a.substr(2, a.find('=') == std::string::npos ? std::string::npos : a.find('=') - 2);
    if (nearest_train_option(name) == name) continue;
    std::string near = nearest_option(name, desc);
    if (near.empty()) near = nearest_train_option(name);
    DT_USAGE("dtrain tune: unrecognised option '--", visible(name), "'", near.empty() ? std::string() : " (did you mean --" + near + "?)");
  }
  TrainConfig cfg;
  if (!parse_train_args(job_args, cfg)) {
    std::cout << desc << "\njob options:\n" << train_help();
    return kExitOk;
  }
  try {
    return run_tune(t, cfg, MPI_COMM_WORLD);
  } catch (const UsageError& e) {  // a job key's check names where the key was written
    throw UsageError(with_origin(cfg, e.what()));
  }
}

}  // namespace dtrain::engine
