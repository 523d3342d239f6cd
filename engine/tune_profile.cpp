// engine/tune_profile.cpp — the measurements of tune_profile.hpp.
#include "engine/tune_profile.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <thread>

#include "comm/discovery.hpp"
#include "core/error.hpp"
#include "engine/compute.hpp"
#include "engine/report.hpp"  // median
#include "engine/train_job.hpp"  // input_transform
#include "io/dataset.hpp"
#include "io/sample_decoder.hpp"
#include "layers/backend.hpp"
#include "layers/models.hpp"
#include "layers/sgd.hpp"

namespace dtrain::engine {

double Profile::t_c_at(int x) const {
  if (points.empty()) DT_USAGE("profile of ", model, " has no T_C points");
  std::vector<ComputePoint> p = points;
  std::sort(p.begin(), p.end(), [](auto& a, auto& b) { return a.minibatch < b.minibatch; });
  for (const auto& q : p)
    if (q.minibatch == x) return q.t_c;
  if (x < p.front().minibatch || p.size() == 1) {  // proportional below/beside the data
    const auto& q = x < p.front().minibatch ? p.front() : p.back();
    return q.t_c * x / q.minibatch;
  }
  if (x > p.back().minibatch) return p.back().t_c * x / p.back().minibatch;
  for (size_t i = 1; i < p.size(); ++i)
    if (x < p[i].minibatch) {
      double f = static_cast<double>(x - p[i - 1].minibatch) / (p[i].minibatch - p[i - 1].minibatch);
      return p[i - 1].t_c + f * (p[i].t_c - p[i - 1].t_c);
    }
  return p.back().t_c;
}

const ComputePoint& Profile::nearest(int x) const {
  if (points.empty()) DT_USAGE("profile of ", model, " has no T_C points");
  const ComputePoint* near = &points.front();
  for (const auto& q : points)
    if (std::abs(q.minibatch - x) < std::abs(near->minibatch - x)) near = &q;
  return *near;
}

double Profile::time_share_at(int x) const { return nearest(x).time_share; }

std::vector<double> Profile::samples_at(int x) const {
  const ComputePoint* near = &nearest(x);
  if (!(near->t_c > 0)) DT_USAGE("profile of ", model, ": T_C ", near->t_c, " at minibatch ", near->minibatch);
  const double scale = t_c_at(x) / near->t_c;
  std::vector<double> s = near->samples.empty() ? std::vector<double>{near->t_c} : near->samples;
  for (double& v : s) v *= scale;
  return s;
}

nlohmann::json Profile::to_json() const {
  nlohmann::json pts = nlohmann::json::array();
  for (const auto& q : points)
    pts.push_back({{"minibatch", q.minibatch}, {"t_c_s", q.t_c}, {"t_c_process_s", q.process_t_c},
                   {"t_c_samples_s", q.samples}, {"time_share", q.time_share},
                   {"images_per_s", q.images_per_s}, {"memory_bytes", q.memory_bytes}, {"background", q.background}});
  auto link = [](const perf::Link& l) { return nlohmann::json{{"bandwidth_Bps", l.bandwidth}, {"latency_s", l.latency}}; };
  return {{"kind", "profile"}, {"model", model}, {"threads", threads}, {"cores", cores},
          {"param_bytes", param_bytes}, {"fixed_bytes", fixed_bytes}, {"per_sample_bytes", per_sample_bytes},
          {"load_before", load_before}, {"points", pts}, {"intra", link(links.intra)},
          {"inter", link(links.inter)}, {"links_source", links_source}, {"poll_period_s", poll_period},
          {"poll_cpu_fraction", poll_fraction}, {"update_s", update_s}, {"t_c_given", t_c_given}};
}

Profile Profile::from_json(const nlohmann::json& j) {
  // Every field is checked for its type and range here, so that a hand-edited or
  // truncated profile is a usage error naming the field, never an internal check
  // failure further on (perfmodel divides by bandwidths and T_C).
  auto get = [](const nlohmann::json& o, const std::string& where, const char* key) -> const nlohmann::json& {
    if (!o.is_object()) DT_USAGE("profile: ", where.empty() ? "the file" : where, " is not a JSON object");
    auto it = o.find(key);
    if (it == o.end()) DT_USAGE("profile: ", where, where.empty() ? "" : ".", key, " is missing");
    return *it;
  };
  auto number = [&](const nlohmann::json& o, const std::string& where, const char* key, double lo, bool open,
                    const char* range, const double* fallback = nullptr) {
    const std::string name = where + (where.empty() ? "" : ".") + key;
    if (fallback && (!o.is_object() || !o.contains(key))) return *fallback;
    const nlohmann::json& v = get(o, where, key);
    if (!v.is_number()) DT_USAGE("profile: ", name, " is not a number (", v.dump(), ")");
    const double d = v.get<double>();
    if (!std::isfinite(d) || (open ? !(d > lo) : !(d >= lo))) DT_USAGE("profile: ", name, " ", d, " must be ", range);
    return d;
  };
  auto integer = [&](const nlohmann::json& o, const std::string& where, const char* key, int lo) {
    const std::string name = where + (where.empty() ? "" : ".") + key;
    const nlohmann::json& v = get(o, where, key);
    if (!v.is_number_integer()) DT_USAGE("profile: ", name, " is not an integer (", v.dump(), ")");
    const int64_t i = v.get<int64_t>();
    if (i < lo || i > (int64_t{1} << 30)) DT_USAGE("profile: ", name, " ", i, " must be ≥ ", lo);
    return static_cast<int>(i);
  };
  auto samples = [&](const nlohmann::json& o, const std::string& where, const char* key) {
    std::vector<double> out;
    if (!o.contains(key)) return out;
    const nlohmann::json& v = o.at(key);
    const std::string name = where + "." + key;
    if (!v.is_array()) DT_USAGE("profile: ", name, " is not an array");
    for (const auto& e : v) {
      if (!e.is_number() || !std::isfinite(e.get<double>()) || !(e.get<double>() > 0))
        DT_USAGE("profile: T_C sample ", e.dump(), " in ", name, " must be a number > 0");
      out.push_back(e.get<double>());
    }
    return out;
  };
  const double zero = 0, one = 1;
  Profile p;
  try {
    if (j.contains("kind") && j["kind"] != "profile")  // written by tune as "profile"; absent in older ones
      DT_USAGE("profile: kind is ", j["kind"].dump(), ", not \"profile\" (not a file dtrain tune wrote)");
    const nlohmann::json& model = get(j, "", "model");
    if (!model.is_string() || model.get<std::string>().empty())
      DT_USAGE("profile: model is not a model name (", model.dump(), ")");
    p.model = model.get<std::string>();
    p.threads = integer(j, "", "threads", 1);
    p.cores = number(j, "", "cores", 0, true, "> 0");
    p.param_bytes = number(j, "", "param_bytes", 0, true, "> 0");  // every model has parameters
    if (p.param_bytes > 1e15) DT_USAGE("profile: param_bytes ", p.param_bytes, " must be at most 1e15 (a petabyte)");
    p.fixed_bytes = number(j, "", "fixed_bytes", 0, false, "≥ 0");
    p.per_sample_bytes = number(j, "", "per_sample_bytes", 0, false, "≥ 0");
    p.load_before = number(j, "", "load_before", 0, false, "≥ 0", &zero);
    const nlohmann::json& pts = get(j, "", "points");
    if (!pts.is_array()) DT_USAGE("profile: points is not an array");
    if (pts.empty()) DT_USAGE("profile: points is empty (no T_C measurement)");
    for (size_t i = 0; i < pts.size(); ++i) {
      const nlohmann::json& q = pts[i];
      const std::string w = "points[" + std::to_string(i) + "]";
      ComputePoint c;
      c.minibatch = integer(q, w, "minibatch", 1);
      c.t_c = number(q, w, "t_c_s", 0, true, "> 0");
      c.samples = samples(q, w, "t_c_samples_s");
      c.process_t_c = samples(q, w, "t_c_process_s");
      c.images_per_s = number(q, w, "images_per_s", 0, false, "≥ 0");
      c.memory_bytes = number(q, w, "memory_bytes", 0, false, "≥ 0");
      c.background = number(q, w, "background", 0, false, "≥ 0", &zero);
      c.time_share = number(q, w, "time_share", 0, true, "> 0", &one);
      p.points.push_back(c);
    }
    auto link = [&](const char* key) {
      const nlohmann::json& l = get(j, "", key);
      return perf::Link{number(l, key, "bandwidth_Bps", 0, true, "> 0 (bytes/s)"),
                        number(l, key, "latency_s", 0, false, "≥ 0 (seconds)")};
    };
    p.links.intra = link("intra");
    p.links.inter = link("inter");
    if (j.contains("links_source")) {
      if (!j.at("links_source").is_string()) DT_USAGE("profile: links_source is not a string");
      p.links_source = j.at("links_source").get<std::string>();
    }
    p.poll_period = number(j, "", "poll_period_s", 0, false, "≥ 0", &zero);
    p.poll_fraction = number(j, "", "poll_cpu_fraction", 0, false, "in [0, 1]", &zero);
    if (p.poll_fraction > 1) DT_USAGE("profile: poll_cpu_fraction ", p.poll_fraction, " must be in [0, 1]");
    p.update_s = number(j, "", "update_s", 0, false, "≥ 0 (seconds)", &zero);
    if (j.contains("t_c_given")) {
      if (!j.at("t_c_given").is_boolean()) DT_USAGE("profile: t_c_given is not true or false");
      p.t_c_given = j.at("t_c_given").get<bool>();
    }
  } catch (const nlohmann::json::exception& e) {
    DT_USAGE("profile: missing or bad field (", e.what(), ")");
  }
  return p;
}

namespace {
// What both measurements run: the trainer's backend and device path (on GPUs
// the profiling ranks take turns on GPU 0), the job's model built for
// minibatch X with its seed, and its SGD (momentum, weight decay and which
// parameters decay as in the job).
struct ProfiledModel {
  std::unique_ptr<layers::Backend> backend;
  std::unique_ptr<io::Dataset> data;  // the job's training set; null without one
  layers::Net net;
  std::unique_ptr<layers::Sgd> sgd;
};

ProfiledModel make_profiled_model(const TrainConfig& cfg, int x, int threads) {
  layers::set_cpu_threads(threads);
  std::unique_ptr<layers::Backend> backend = make_compute_backend(cfg, 0, false);
  std::unique_ptr<io::Dataset> data;
  if (!cfg.train_data.empty()) data = open_job_dataset(cfg.train_data, "train-data");
  layers::ModelOptions mo;
  mo.minibatch = x;
  mo.classes = data ? data->classes() : 0;
  mo.dropout = cfg.dropout;
  layers::Net net = layers::make_model(cfg.model, mo);
  net.finalize(*backend, static_cast<uint64_t>(cfg.seed), layers::NetOptions{cfg.precision});
  layers::SgdOptions so;
  so.momentum = cfg.momentum;
  so.weight_decay = cfg.weight_decay;
  so.decay_bias_bn = cfg.decay_bias_bn;
  auto sgd = std::make_unique<layers::Sgd>(*backend, so, net.param_ranges(), net.num_params());
  return ProfiledModel{std::move(backend), std::move(data), std::move(net), std::move(sgd)};
}
}  // namespace

double measure_step_time(const TrainConfig& cfg, int x, int steps, int threads, std::vector<double>* per_step,
                         double* cpu_per_step, double* workspace) {
  DT_CHECK(x >= 1 && steps >= 1, "measure_step_time: minibatch ", x, ", steps ", steps);
  ProfiledModel m = make_profiled_model(cfg, x, threads);
  auto& backend = m.backend;
  auto& data = m.data;
  layers::Net& net = m.net;
  layers::Sgd& sgd = *m.sgd;
  const layers::Shape in = net.input_shape();
  const int k = static_cast<int>(net.output_shape().c());
  layers::Tensor xt(layers::Shape(x, in.c(), in.h(), in.w()));
  std::vector<int32_t> labels(static_cast<size_t>(x));
  if (data && data->n() >= x) {  // real images: the first minibatch of the set
    // Through the evaluation transform (the image itself when it has the input's size).
    const io::InputTransform tr = input_transform(cfg, in, /*train=*/false);
    io::check_transform(*data, tr);
    std::vector<int64_t> first(static_cast<size_t>(x));
    for (int i = 0; i < x; ++i) first[static_cast<size_t>(i)] = i;
    io::load_batch(*data, first, tr, io::NormalizeTable(in.c(), cfg.mean, cfg.std), 0, 0, 1, xt.data());
    std::copy_n(data->labels().begin(), x, labels.begin());
  } else {
    std::mt19937 rng(1);
    std::normal_distribution<float> nd;
    for (int64_t i = 0; i < xt.numel(); ++i) xt.data()[i] = nd(rng);
    for (int i = 0; i < x; ++i) labels[static_cast<size_t>(i)] = i % k;
  }
  StepBuffers dev(*backend, x, in, k);
  std::vector<double> t;
  double cpu0 = 0;
  for (int s = 0; s <= steps; ++s) {
    if (s == 1) cpu0 = self_cpu_seconds();
    auto t0 = std::chrono::steady_clock::now();
    net.set_step_seed(static_cast<uint64_t>(s));
    const layers::Tensor& logits = net.forward(dev.x(xt.data(), x), true);
    const int32_t* lab = dev.labels(labels.data(), x);
    int64_t correct = 0;
    backend->softmax_xent_forward(logits.data(), lab, x, k, dev.probs(), &correct);
    layers::Tensor dlogits = dev.dlogits(x);
    backend->softmax_xent_backward(dev.probs(), lab, x, k, 1.0f / x, dlogits.data());
    net.backward(dlogits);
    sgd.step(net, 1e-4f);
    backend->synchronize();  // asynchronous devices: the step is done when its kernels are
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) t.push_back(dt);  // the first step allocates and warms the caches
  }
  if (per_step) per_step->insert(per_step->end(), t.begin(), t.end());
  if (cpu_per_step) *cpu_per_step = (self_cpu_seconds() - cpu0) / steps;
  if (workspace) *workspace = static_cast<double>(workspace_bytes(*backend));
  return median(t);
}

double measure_update_time(const TrainConfig& cfg, int threads, int reps) {
  DT_CHECK(reps >= 1 && threads >= 1, "measure_update_time: reps ", reps, ", threads ", threads);
  ProfiledModel m = make_profiled_model(cfg, 1, threads);
  auto& backend = m.backend;
  layers::Net& net = m.net;
  layers::Sgd& sgd = *m.sgd;
  const size_t n = net.num_params();
  std::vector<float> g(n, 1e-4f);
  backend->upload(g.data(), net.grads().data(), n * sizeof(float));
  std::vector<double> t;
  for (int r = 0; r <= reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    double sumsq = 0;
    with_host_copy(*backend, net.grads().data(), n, /*write_back=*/false, [&](float* x) {
      for (size_t i = 0; i < n; ++i) sumsq += static_cast<double>(x[i]) * x[i];
    });
    DT_CHECK(std::isfinite(sumsq), "measure_update_time: non-finite gradient");
    sgd.step(net, 1e-4f);
    backend->synchronize();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) t.push_back(dt);  // the first touches the momentum state
  }
  return median(t);
}

void measure_memory(const std::string& model, int classes, Profile& p) {
  layers::ModelOptions mo;
  mo.minibatch = 1;
  mo.classes = classes;
  layers::Net net = layers::make_model(model, mo);
  double params = 0, act = 0;
  for (const auto& r : net.summary()) {
    params += static_cast<double>(r.params);
    act += static_cast<double>(r.out.numel());  // per sample (built for N = 1)
  }
  p.param_bytes = 4.0 * params;
  p.fixed_bytes = 3.0 * p.param_bytes;        // parameters + gradients + momentum
  p.per_sample_bytes = 2.0 * 4.0 * act;       // activations and their gradients
}

perf::Link measure_link(MPI_Comm world, int a, int b, size_t bytes) {
  DT_CHECK(bytes < (size_t{1} << 31), "ping-pong of ", bytes, " bytes");
  double lat = comm::pingpong_seconds(world, a, b, 8, 50, true);
  double big = comm::pingpong_seconds(world, a, b, bytes, 10);
  perf::Link l;
  l.latency = lat;
  l.bandwidth = static_cast<double>(bytes) / std::max(big - lat, 1e-9);
  return l;
}

// Busy CPU seconds of the whole machine since boot (/proc/stat "cpu" line:
// user nice system idle iowait irq softirq steal; busy = all − idle − iowait −
// nice: processes at a lowered priority (nice > 0) take only what normal-priority
// threads leave — weight 15 against 1024 at nice 19 — so they are not counted
// as competing background).
double machine_busy_seconds() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  double v[8] = {0};
  if (!(f >> cpu) || cpu != "cpu") return 0;
  for (double& x : v) f >> x;
  double busy = v[0] + v[2] + v[5] + v[6] + v[7];
  return busy / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double self_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

double load_average_1m() {
  std::ifstream f("/proc/loadavg");
  double l = 0;
  if (!(f >> l)) return 0;
  return l;
}

}  // namespace dtrain::engine
