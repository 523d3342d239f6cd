// engine/tune.cpp — `dtrain tune`: measure T_C(X_mini), memory and links on
// this machine, choose the minibatch (the knee) and the number of parameter
// servers for a cluster of n nodes × g GPUs from the model of DESIGN.md §4,
// print the predictions for G = 1 … n·g, and write a tuned job file (plus the
// profile as JSON for `dtrain report`).
//
//   [mpirun -np R] dtrain tune --job J --nodes n --gpus-per-node g
//       [--link-gbps B] [--device-memory-gb M] [--target-efficiency a] [--out tuned.ini]
//       [--candidates 16,32,64,128] [--profile-steps 5] [--key value ...]
// Other --key value pairs are job options (as for `dtrain train`).
#include <mpi.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "core/error.hpp"
#include "engine/commands.hpp"
#include "engine/config.hpp"
#include "engine/tune.hpp"

namespace po = boost::program_options;

namespace dtrain::engine {

namespace {

std::vector<int> parse_ints(const std::string& key, const std::string& s) {
  std::vector<int> v;
  std::stringstream is(s);
  std::string item;
  while (std::getline(is, item, ',')) {
    try {
      size_t used = 0;
      int x = std::stoi(item, &used);
      if (used != item.size() || x < 1) throw std::invalid_argument(item);
      v.push_back(x);
    } catch (const std::exception&) {
      DT_USAGE("dtrain tune: option '", key, "': '", s, "' is not a comma-separated list of positive integers");
    }
  }
  if (v.empty()) DT_USAGE("dtrain tune: option '", key, "' is empty");
  return v;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

std::string job_file_text(const TrainConfig& c) {
  std::ostringstream o;
  auto kv = [&](const char* k, const auto& v) { o << k << " = " << v << "\n"; };
  auto str = [&](const char* k, const std::string& v) {
    if (!v.empty()) kv(k, v);
  };
  auto list = [](const std::vector<float>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) s += ',';
      s += fmt("%.9g", v[i]);
    }
    return s;
  };
  kv("model", c.model);
  str("train-data", c.train_data);
  str("test-data", c.test_data);
  kv("device", c.device);
  kv("reference-kernels", c.reference_kernels ? "true" : "false");
  kv("threads", c.threads);
  kv("minibatch", c.minibatch);
  kv("eval-minibatch", c.eval_minibatch);
  kv("epochs", c.epochs);
  kv("max-steps", c.max_steps);
  kv("max-train-samples", c.max_train_samples);
  kv("max-test-samples", c.max_test_samples);
  kv("seed", c.seed);
  kv("lr", fmt("%.9g", c.lr));
  kv("lr-schedule", c.lr_schedule);
  kv("warmup-epochs", fmt("%.9g", c.warmup_epochs));
  kv("lr-step-epochs", fmt("%.9g", c.lr_step_epochs));
  kv("lr-gamma", fmt("%.9g", c.lr_gamma));
  kv("momentum", fmt("%.9g", c.momentum));
  kv("weight-decay", fmt("%.9g", c.weight_decay));
  kv("decay-bias-bn", c.decay_bias_bn ? "true" : "false");
  kv("dropout", fmt("%.9g", c.dropout));
  kv("loader-threads", c.loader_threads);
  kv("loader-depth", c.loader_depth);
  kv("augment-pad", c.augment_pad);
  kv("augment-flip", c.augment_flip ? "true" : "false");
  str("mean", list(c.mean));
  str("std", list(c.std));
  kv("mode", c.mode);
  kv("ps", c.ps);
  kv("ranks-per-node", c.ranks_per_node);
  kv("bucket-mb", fmt("%.9g", c.bucket_mb));
  kv("max-chunk-elems", c.max_chunk_elems);
  kv("wait-policy", c.wait_policy);
  kv("comm-timeout", fmt("%.9g", c.comm_timeout));
  str("metrics", c.metrics);
  kv("log-interval", c.log_interval);
  str("save-params", c.save_params);
  return o.str();
}

int cmd_tune(const std::vector<std::string>& args) {
  TuneOptions t;
  std::string candidates = "16,32,64,128,256";
  po::options_description desc(
      "dtrain tune --job J --nodes n --gpus-per-node g [--link-gbps B] [--device-memory-gb M]\n"
      "            [--target-efficiency a] [--out tuned.ini] [--key value ...]  (other keys: job options)");
  desc.add_options()("help,h", "this help")("nodes", po::value(&t.nodes)->default_value(1), "nodes of the target cluster")(
      "gpus-per-node", po::value(&t.gpus_per_node)->default_value(1), "workers (GPUs) per node")(
      "link-gbps", po::value(&t.link_gbps)->default_value(0), "network link, Gb/s (0: measured by ping-pong, else 10)")(
      "intra-gbps", po::value(&t.intra_gbps)->default_value(0), "link inside a node, Gb/s (0: measured, else = link)")(
      "latency-us", po::value(&t.latency_us)->default_value(-1), "per-message latency, µs (−1: measured, else 5)")(
      "device-memory-gb", po::value(&t.memory_gb)->default_value(0), "memory per worker, GB (0: host RAM / workers per node)")(
      "target-efficiency", po::value(&t.target_efficiency)->default_value(0.8), "α* for the largest useful G")(
      "knee", po::value(&t.knee)->default_value(0.05), "minibatch: smallest within this fraction of the best images/s")(
      "candidates", po::value(&candidates)->default_value(candidates), "minibatch sizes to profile")(
      "profile-steps", po::value(&t.profile_steps)->default_value(5), "measured steps per candidate (after one warm-up)")(
      "t-c-ms", po::value(&t.t_c_ms)->default_value(0), "what-if: T_C per step (ms) at the job's minibatch, e.g. a GPU's; 0: measure")(
      "base-batch", po::value(&t.base_batch)->default_value(0), "global batch the job's lr is for (0: the job's minibatch)")(
      "max-lr-scale", po::value(&t.max_lr_scale)->default_value(t.max_lr_scale),
      "largest factor the linear scaling rule may multiply the lr by")(
      "out", po::value(&t.out)->default_value("tuned.ini"), "tuned job file (the profile goes to OUT.profile.json)");
  po::variables_map vm;
  std::vector<std::string> job_args;
  try {
    auto parsed = po::command_line_parser(args).options(desc).style(option_style()).allow_unregistered().run();
    po::store(parsed, vm);
    po::notify(vm);
    job_args = po::collect_unrecognized(parsed.options, po::include_positional);
  } catch (const po::error& e) {
    DT_USAGE("dtrain tune: ", e.what());
  }
  if (vm.count("help")) {
    std::cout << desc;
    return kExitOk;
  }
  t.candidates = parse_ints("candidates", candidates);
  if (t.nodes < 1 || t.gpus_per_node < 1) DT_USAGE("dtrain tune: options 'nodes' and 'gpus-per-node' must be ≥ 1");
  if (!(t.target_efficiency > 0 && t.target_efficiency <= 1)) DT_USAGE("dtrain tune: option 'target-efficiency' must be in (0, 1]");
  if (t.profile_steps < 1) DT_USAGE("dtrain tune: option 'profile-steps' must be ≥ 1");
  if (static_cast<long long>(t.nodes) * t.gpus_per_node > (1 << 20))
    DT_USAGE("dtrain tune: options 'nodes' × 'gpus-per-node' = ", static_cast<long long>(t.nodes) * t.gpus_per_node,
             " workers; at most 1048576");
  if (!(t.knee >= 0 && t.knee < 1)) DT_USAGE("dtrain tune: option 'knee' must be in [0, 1)");
  if (!(t.max_lr_scale >= 1)) DT_USAGE("dtrain tune: option 'max-lr-scale' must be ≥ 1");
  if (!(t.memory_gb >= 0)) DT_USAGE("dtrain tune: option 'device-memory-gb' must be ≥ 0");
  if (t.base_batch < 0) DT_USAGE("dtrain tune: option 'base-batch' must be ≥ 0");
  TrainConfig cfg;
  if (!parse_train_args(job_args, cfg)) {
    std::cout << desc << "\njob options:\n" << train_help();
    return kExitOk;
  }
  return run_tune(t, cfg, MPI_COMM_WORLD);
}

}  // namespace dtrain::engine
