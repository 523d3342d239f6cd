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
  nlohmann::json rec;  // the run record
  double t_c = 0, t_o = 0, step = 0, ips = 0;
  int intervals = 0;
};

Run read_run(const std::string& path) {
  std::ifstream f(path);
  if (!f) DT_USAGE("dtrain report: option 'metrics': cannot open '", path, "'");
  Run r;
  r.file = path;
  std::vector<nlohmann::json> steps;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      DT_USAGE("dtrain report: ", path, ": a line is not JSON (", e.what(), ")");
    }
    std::string kind = j.value("kind", "");
    if (kind == "step") steps.push_back(j);
    if (kind == "run") r.rec = j;
  }
  if (r.rec.is_null())
    DT_USAGE("dtrain report: ", path, " has no {\"kind\":\"run\"} record (written when a run finishes)");
  if (steps.empty()) DT_USAGE("dtrain report: ", path, " has no step records");
  // The first interval holds the warm-up (allocation, first touches): dropped when others exist.
  if (steps.size() > 2) steps.erase(steps.begin());
  const double global = r.rec.at("minibatch").get<double>() * r.rec.at("workers").get<double>();
  std::vector<double> tc, st, ips;
  for (const auto& s : steps) {
    double i = s.at("images_per_s").get<double>();
    ips.push_back(i);
    st.push_back(global / i);
    tc.push_back(s.at("t_compute_s").get<double>());
  }
  r.intervals = static_cast<int>(steps.size());
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

  bool have_profile = !profile_path.empty();
  Profile prof;
  if (have_profile) {
    std::ifstream f(profile_path);
    if (!f) DT_USAGE("dtrain report: option 'profile': cannot open '", profile_path, "'");
    try {
      prof = Profile::from_json(nlohmann::json::parse(f));
    } catch (const nlohmann::json::exception& e) {
      DT_USAGE("dtrain report: option 'profile': ", profile_path, " is not JSON (", e.what(), ")");
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
  for (const auto& r : runs) {
    const auto& j = r.rec;
    perf::RunShape s;
    s.mode = mode_index(j.at("mode").get<std::string>());
    s.workers = j.at("workers").get<int>();
    s.servers = j.at("servers").get<int>();
    s.ranks_per_node = j.at("ranks_per_node").get<int>();
    s.threads = std::max(1, j.at("threads").get<int>());
    s.sleeping_waits = j.value("wait_policy", std::string("spin")) == "sleep";
    const std::string model = j.at("model").get<std::string>();
    const int x = j.at("minibatch").get<int>();
    perf::MachineLoad m{j.at("cores").get<double>(), j.value("background_cores", 0.0)};
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
    const std::string mode = j.at("mode").get<std::string>();
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
  std::printf("measured: medians over log intervals (first dropped), then over the n runs of a configuration;\n"
              "  T_O = step − T_C; S = G·step(1 worker)/step(G).\n"
              "predicted: perfmodel predict_step (%s), mean over the n runs;\n"
              "  bg = cores used by other jobs during the runs (mean).\n"
              "%d of %zu configuration(s) outside ±15%%.\n",
              have_profile ? ("profile " + profile_path).c_str() : "T_C1 measured in-process", misses, groups.size());
  return kExitOk;
}

}  // namespace dtrain::engine
