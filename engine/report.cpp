// engine/report.cpp — the run record (appended by `dtrain train`) and
// `dtrain report`: measured against predicted step times.
#include "engine/report.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "comm/wait.hpp"
#include "core/error.hpp"
#include "engine/perfmodel.hpp"
#include "engine/tune_profile.hpp"

namespace po = boost::program_options;

namespace dtrain::engine {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int mode_index(const std::string& m) { return m == "ps" ? 1 : m == "hybrid" ? 2 : 0; }

struct Run {
  std::string file;
  // The run record's fields, checked by read_run.
  std::string model, mode, wait_policy;
  int minibatch = 0, workers = 0, servers = 0, ranks_per_node = 0, threads = 0;
  double cores = 0, background = 0;
  double t_c = 0, t_o = 0, step = 0, ips = 0;
  int intervals = 0;
};

// Field readers for one record (a line of a metrics file): each failure is a
// usage error naming the file, the line and the field.
struct Record {
  const nlohmann::json& j;
  const std::string& path;
  int line;
  const char* kind;

  template <typename... A>
  [[noreturn]] void bad(const char* key, A&&... what) const {
    DT_USAGE("dtrain report: ", path, ":", line, ": ", kind, " record: field '", key, "' ",
             std::forward<A>(what)...);
  }
  const nlohmann::json& at(const char* key) const {
    auto it = j.find(key);
    if (it == j.end()) bad(key, "is missing");
    return *it;
  }
  std::string text(const char* key, const char* fallback = nullptr) const {
    if (fallback && !j.contains(key)) return fallback;
    const nlohmann::json& v = at(key);
    if (!v.is_string() || v.get<std::string>().empty()) bad(key, "is not a non-empty string (", v.dump(), ")");
    return v.get<std::string>();
  }
  int integer(const char* key, int lo) const {
    const nlohmann::json& v = at(key);
    if (!v.is_number_integer()) bad(key, "is not an integer (", v.dump(), ")");
    const int64_t i = v.get<int64_t>();
    if (i < lo) bad(key, "is ", i, ", must be ≥ ", lo);
    if (i > (int64_t{1} << 30)) bad(key, "is ", i, ", too large");
    return static_cast<int>(i);
  }
  // A finite number > lo (open) or ≥ lo; absent: the fallback when given.
  double number(const char* key, double lo, bool open, const double* fallback = nullptr) const {
    if (fallback && !j.contains(key)) return *fallback;
    const nlohmann::json& v = at(key);
    if (!v.is_number()) bad(key, "is not a number (", v.dump(), ")");
    const double d = v.get<double>();
    if (!std::isfinite(d) || (open ? !(d > lo) : !(d >= lo)))
      bad(key, "is ", d, ", must be a finite number ", open ? "> " : "≥ ", lo);
    return d;
  }
};

Run read_run(const std::string& path) {
  std::ifstream f(path);
  if (!f) DT_USAGE("dtrain report: option 'metrics': cannot open '", path, "'");
  Run r;
  r.file = path;
  std::vector<double> st, tc, ips;
  nlohmann::json rec;  // the last run record
  int rec_line = 0, n = 0;
  std::string line;
  while (std::getline(f, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      DT_USAGE("dtrain report: ", path, ":", n, ": the line is not JSON (", e.what(), ")");
    }
    if (!j.is_object())
      DT_USAGE("dtrain report: ", path, ":", n, ": the line is not a JSON object (", j.dump().substr(0, 60),
               ") — a metrics file holds one {\"kind\": ...} record per line");
    auto kind = j.find("kind");
    if (kind == j.end()) continue;  // not a record report reads
    if (!kind->is_string())
      DT_USAGE("dtrain report: ", path, ":", n, ": field 'kind' is not a string (", kind->dump(), ")");
    if (*kind == "run") {
      rec = std::move(j);
      rec_line = n;
    } else if (*kind == "step") {
      const Record s{j, path, n, "step"};
      ips.push_back(s.number("images_per_s", 0, true));
      tc.push_back(s.number("t_compute_s", 0, false));
    }
  }
  if (rec.is_null())
    DT_USAGE("dtrain report: ", path, " has no {\"kind\":\"run\"} record (written when a run finishes)");
  const Record q{rec, path, rec_line, "run"};
  r.model = q.text("model");
  r.mode = q.text("mode");
  if (r.mode != "allreduce" && r.mode != "ps" && r.mode != "hybrid")
    q.bad("mode", "is '", r.mode, "', must be allreduce, ps or hybrid");
  r.minibatch = q.integer("minibatch", 1);
  r.workers = q.integer("workers", 1);
  r.servers = q.integer("servers", 0);
  if (r.mode != "allreduce" && r.servers < 1) q.bad("servers", "is ", r.servers, ", mode ", r.mode, " needs ≥ 1");
  r.ranks_per_node = q.integer("ranks_per_node", 0);
  r.threads = q.integer("threads", 0);
  r.cores = q.number("cores", 0, true);
  const double zero = 0;
  r.background = q.number("background_cores", 0, false, &zero);
  r.wait_policy = q.text("wait_policy", "spin");
  if (ips.empty())
    DT_USAGE("dtrain report: ", path, " has no step records (the run was shorter than its --log-interval; "
             "use a smaller --log-interval)");
  // The first interval holds the warm-up (allocation, first touches): dropped when others exist.
  if (ips.size() > 2) {
    ips.erase(ips.begin());
    tc.erase(tc.begin());
  }
  const double global = static_cast<double>(r.minibatch) * r.workers;
  for (double i : ips) st.push_back(global / i);
  r.intervals = static_cast<int>(ips.size());
  r.step = median(st);
  r.t_c = median(tc);
  r.t_o = std::max(0.0, r.step - r.t_c);  // everything that is not compute: the paper's T_O
  r.ips = median(ips);
  return r;
}

}  // namespace

RunClock start_run_clock() {
  return {MPI_Wtime(), machine_busy_seconds(), load_average_1m()};
}

void append_run_record(const TrainConfig& cfg, const TrainResult& r, const RunClock& c, MPI_Comm world) {
  int rank = 0, size = 1;
  DT_CHECK_MPI(MPI_Comm_rank(world, &rank));
  DT_CHECK_MPI(MPI_Comm_size(world, &size));
  double mine = self_cpu_seconds(), job = 0;
  DT_CHECK_MPI(MPI_Reduce(&mine, &job, 1, MPI_DOUBLE, MPI_SUM, 0, world));
  if (rank != 0 || cfg.metrics.empty()) return;
  const double wall = MPI_Wtime() - c.wall0;
  const double busy = c.busy0 > 0 ? machine_busy_seconds() - c.busy0 : 0;
  const int workers = size - cfg.ps;
  const int nodes = cfg.ranks_per_node > 0 ? workers / cfg.ranks_per_node : 1;
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  nlohmann::json rec = {
      {"kind", "run"}, {"model", cfg.model}, {"minibatch", cfg.minibatch},
      {"mode", size > 1 ? cfg.mode : std::string("allreduce")}, {"workers", workers}, {"servers", cfg.ps},
      {"ranks_per_node", cfg.ranks_per_node}, {"nodes", nodes},
      {"threads", cfg.threads > 0 ? cfg.threads : std::max(1, static_cast<int>(cores) / size)},
      {"world_size", size}, {"cores", cores}, {"steps", r.steps}, {"images_per_s", r.images_per_s},
      {"wall_s", wall}, {"job_cpu_s", job}, {"machine_busy_s", busy},
      {"background_cores", busy > 0 && wall > 0 ? std::max(0.0, (busy - job) / wall) : 0.0},
      {"load_1m_start", c.load0}, {"wait_policy", comm::wait_policy_name(comm::wait_policy())}};
  std::FILE* f = std::fopen(cfg.metrics.c_str(), "a");
  if (!f) DT_FAIL("cannot append the run record to '", cfg.metrics, "'");
  std::fprintf(f, "%s\n", rec.dump().c_str());
  std::fclose(f);
}

int cmd_report(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  std::string profile_path, train_data;
  double link_gbps = 40, latency_us = 5;
  int steps = 10;
  po::options_description desc(
      "dtrain report --metrics run1.jsonl [run2.jsonl ...] [--profile tuned.profile.json]");
  desc.add_options()("help,h", "this help")(
      "metrics", po::value(&files)->multitoken(), "metrics files of finished runs (JSON Lines with a run record)")(
      "profile", po::value(&profile_path), "profile written by dtrain tune (T_C, links); else T_C is measured here")(
      "train-data", po::value(&train_data), "without --profile: images for the in-process T_C measurement")(
      "link-gbps", po::value(&link_gbps)->default_value(link_gbps), "without --profile: link bandwidth, Gb/s")(
      "latency-us", po::value(&latency_us)->default_value(latency_us), "without --profile: per-message latency, µs")(
      "profile-steps", po::value(&steps)->default_value(steps), "without --profile: steps per T_C measurement");
  po::positional_options_description pos;
  pos.add("metrics", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).style(option_style()).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    DT_USAGE("dtrain report: ", e.what());
  }
  if (vm.count("help") || files.empty()) {
    std::cout << desc;
    return files.empty() && !vm.count("help") ? kExitUsage : kExitOk;
  }
  std::vector<Run> runs;
  for (const auto& f : files) runs.push_back(read_run(f));

  if (!(link_gbps > 0) || !std::isfinite(link_gbps))
    DT_USAGE("dtrain report: option 'link-gbps': ", link_gbps, " must be > 0");
  if (!(latency_us >= 0) || !std::isfinite(latency_us))
    DT_USAGE("dtrain report: option 'latency-us': ", latency_us, " must be ≥ 0");
  if (steps < 1) DT_USAGE("dtrain report: option 'profile-steps': ", steps, " must be ≥ 1");
  bool have_profile = !profile_path.empty();
  Profile prof;
  if (have_profile) {
    std::ifstream f(profile_path);
    if (!f) DT_USAGE("dtrain report: option 'profile': cannot open '", profile_path, "'");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(f);
    } catch (const nlohmann::json::exception& e) {
      DT_USAGE("dtrain report: option 'profile': ", profile_path, " is not JSON (", e.what(), ")");
    }
    try {
      prof = Profile::from_json(j);
    } catch (const UsageError& e) {
      std::string what = e.what();
      if (what.rfind("profile: ", 0) == 0) what.erase(0, 9);
      DT_USAGE("dtrain report: option 'profile': ", profile_path, ": ", what);
    }
  }
  perf::Links given;
  given.intra = given.inter = {link_gbps * 1e9 / 8, latency_us * 1e-6};
  std::map<std::string, double> t_c1_cache;  // "model/minibatch/threads" → T_C1

  // Runs of the same configuration (repeats) form one row: measured = the
  // median over the runs, predicted = the mean of the runs' predictions (each
  // with its own background load).
  struct Group {
    std::string name, model, mode;
    perf::RunShape shape;
    int x = 0, n = 0;
    std::vector<double> step, t_c;
    double bg = 0, cores = 1;
    perf::StepPrediction pred;  // summed, then averaged
    std::vector<double> samples;
    perf::Links links;
  };
  std::vector<Group> groups;
  std::vector<std::string> not_profiled;  // runs the profile did not apply to, and why
  for (const auto& r : runs) {
    perf::RunShape s;
    s.mode = mode_index(r.mode);
    s.workers = r.workers;
    s.servers = r.servers;
    s.ranks_per_node = r.ranks_per_node;
    s.threads = std::max(1, r.threads);
    s.sleeping_waits = r.wait_policy == "sleep";
    const std::string& model = r.model;
    const int x = r.minibatch;
    perf::MachineLoad m{r.cores, r.background};
    m.poll_period = comm::kSleepMaxS;
    double t_c1 = 0;
    std::vector<double> samples;
    perf::Links links = given;
    if (have_profile && prof.model == model && prof.threads == s.threads) {
      t_c1 = prof.t_c_at(x);
      samples = prof.samples_at(x);
      m.time_share = prof.time_share_at(x);
      if (prof.poll_period > 0) {
        m.poll_period = prof.poll_period;
        m.poll_fraction = prof.poll_fraction;
      }
      links = prof.links;
      s.param_bytes = prof.param_bytes;
    } else {
      if (have_profile) {
        std::string why = prof.model != model ? "model " + model + " ≠ profile's " + prof.model
                                              : "threads " + std::to_string(s.threads) + " ≠ profile's " +
                                                    std::to_string(prof.threads);
        not_profiled.push_back(r.file + ": " + why + ": its T_C1 was measured in-process here (profile's links kept)");
      }
      std::string key = model + "/" + std::to_string(x) + "/" + std::to_string(s.threads);
      if (!t_c1_cache.count(key)) {
        TrainConfig cfg;
        cfg.model = model;
        cfg.train_data = train_data;
        t_c1_cache[key] = measure_step_time(cfg, x, steps, s.threads);
      }
      t_c1 = t_c1_cache[key];
      Profile mem;
      measure_memory(model, 0, mem);
      s.param_bytes = mem.param_bytes;
      if (have_profile) links = prof.links;
      samples = {t_c1};
    }
    perf::StepPrediction p = perf::predict_step(samples, s, links, m);
    const std::string& mode = r.mode;
    Group* g = nullptr;
    for (auto& q : groups)
      if (q.model == model && q.mode == mode && q.x == x && q.shape.workers == s.workers &&
          q.shape.servers == s.servers && q.shape.ranks_per_node == s.ranks_per_node &&
          q.shape.threads == s.threads && q.shape.sleeping_waits == s.sleeping_waits)
        g = &q;
    if (!g) {
      groups.push_back({});
      g = &groups.back();
      g->name = r.file;
      g->model = model;
      g->mode = mode;
      g->shape = s;
      g->x = x;
      g->cores = m.cores;
      g->samples = samples;
      g->links = links;
    }
    ++g->n;
    g->step.push_back(r.step);
    g->t_c.push_back(r.t_c);
    g->bg += m.background;
    g->pred.t_c += p.t_c;
    g->pred.t_o += p.t_o;
    g->pred.t_step += p.t_step;
  }
  for (auto& g : groups) {
    g.bg /= g.n;
    g.pred.t_c /= g.n;
    g.pred.t_o /= g.n;
    g.pred.t_step /= g.n;
  }

  std::printf("%-28s %2s %-8s %-9s %2s %2s %2s %4s %3s %-5s | %8s %8s %6s %8s %5s | %8s %8s %8s %5s | %6s %5s\n", "run",
              "n", "model", "mode", "G", "Np", "K", "X", "thr", "wait", "T_C ms", "T_O ms", "R_O", "step ms", "S",
              "T_C ms", "T_O ms", "step ms", "S", "err %", "bg");
  int misses = 0;
  for (const auto& g : groups) {
    const double step = median(g.step), t_c = median(g.t_c), t_o = std::max(0.0, step - t_c);
    // Speedup: against the 1-worker group of the same model and minibatch in the list.
    double s_meas = 0, s_pred = 0;
    for (const auto& b : groups)
      if (b.shape.workers == 1 && b.model == g.model && b.x == g.x) {
        s_meas = g.shape.workers * median(b.step) / step;
        s_pred = g.shape.workers * b.pred.t_step / g.pred.t_step;
      }
    const double err = (g.pred.t_step - step) / step;
    if (std::fabs(err) > 0.15) ++misses;
    std::string name = g.name.size() > 28 ? "…" + g.name.substr(g.name.size() - 26) : g.name;
    std::printf("%-28s %2d %-8s %-9s %2d %2d %2d %4d %3d %-5s | %8.2f %8.2f %6.3f %8.2f %5.2f | %8.2f %8.2f %8.2f %5.2f | %+6.1f %5.2f\n",
                name.c_str(), g.n, g.model.c_str(), g.mode.c_str(), g.shape.workers, g.shape.servers,
                g.shape.ranks_per_node, g.x, g.shape.threads, g.shape.sleeping_waits ? "sleep" : "spin", 1e3 * t_c,
                1e3 * t_o, t_c > 0 ? t_o / t_c : 0.0, 1e3 * step, s_meas, 1e3 * g.pred.t_c, 1e3 * g.pred.t_o,
                1e3 * g.pred.t_step, s_pred, 100 * err, g.bg);
  }
  for (const auto& w : not_profiled) std::printf("not from the profile: %s\n", w.c_str());
  std::string source = "T_C1 measured in-process";
  if (have_profile) {
    source = "profile " + profile_path;
    if (!not_profiled.empty())
      source += "; " + std::to_string(not_profiled.size()) + " of " + std::to_string(runs.size()) +
                " run(s) with T_C1 measured in-process, listed above";
  }
  std::printf("measured: medians over log intervals (first dropped), then over the n runs of a configuration;\n"
              "  T_O = step − T_C; S = G·step(1 worker)/step(G).\n"
              "predicted: perfmodel predict_step (%s), mean over the n runs;\n"
              "  bg = cores used by other jobs during the runs (mean).\n"
              "When ranks outnumber cores, measured T_C is rank 0's own compute time and predicted T_C the\n"
              "  whole job's compute phase: compare the step times (docs/performance-model.md §6).\n"
              "%d of %zu configuration(s) outside ±15%% (step time).\n",
              source.c_str(), misses, groups.size());
  return kExitOk;
}

}  // namespace dtrain::engine
