// engine/report_cmd.cpp — `dtrain report`: finished runs measured against the
// prediction of engine/predict.hpp (the code of `dtrain tune`'s tables), as a
// table or, with --json, as one JSON object (slurm/report plots from it).
#include <algorithm>
#include <charconv>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "engine/options.hpp"
#include "core/format.hpp"
#include "engine/predict.hpp"
#include "engine/report.hpp"
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

Profile read_profile(const std::string& path) {
  std::ifstream f(path);
  if (!f) DT_USAGE("dtrain report: option 'profile': cannot open '", path, "'");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    DT_USAGE("dtrain report: option 'profile': ", path, " is not JSON (", e.what(), ")");
  }
  try {
    return Profile::from_json(j);
  } catch (const UsageError& e) {
    std::string what = e.what();
    if (what.rfind("profile: ", 0) == 0) what.erase(0, 9);
    DT_USAGE("dtrain report: option 'profile': ", path, ": ", what);
  }
}

// Runs of the same configuration (repeats) form one group: measured = the
// median over the runs, predicted = the mean of the runs' predictions (each
// with its own background load, or --background).
struct Group {
  std::vector<std::string> files;
  std::string model, mode;
  perf::RunShape shape;
  int x = 0, n = 0;
  bool from_profile = true;
  std::vector<double> step, t_c;
  double bg = 0, cores = 1;
  perf::StepPrediction pred;  // summed, then averaged
  double pred_speedup = 0;    // likewise
};

}  // namespace

int cmd_report(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  std::string profile_path, train_data;
  std::string background = "run";
  double link_gbps = 40, latency_us = 5;
  int steps = 10;
  bool json = false;
  using format::shortest;
  po::options_description desc(
      "dtrain report --metrics run1.jsonl [run2.jsonl ...] [--profile tuned.profile.json] [--json]");
  desc.add_options()("help,h", "this help")(
      "metrics", po::value(&files)->multitoken(), "metrics files of finished runs (JSON Lines with a run record)")(
      "profile", po::value(&profile_path), "profile written by dtrain tune (T_C, links); else T_C is measured here")(
      "background", po::value(&background)->default_value(background),
      "cores other jobs use, for the prediction: run (each run's measured), profile (the load while "
      "profiling: what dtrain tune's table for this machine assumed) or a number")(
      "json", po::bool_switch(&json), "print one JSON object (configurations, measured, predicted) instead of the table")(
      "train-data", po::value(&train_data), "without --profile: images for the in-process T_C measurement")(
      "link-gbps", po::value(&link_gbps)->default_value(link_gbps, shortest(link_gbps)),
      "without --profile: link bandwidth, Gb/s")(
      "latency-us", po::value(&latency_us)->default_value(latency_us, shortest(latency_us)),
      "without --profile: per-message latency, µs")(
      "profile-steps", po::value(&steps)->default_value(steps), "without --profile: steps per T_C measurement");
  po::positional_options_description pos;
  pos.add("metrics", -1);
  po::variables_map vm = parse_command_line(args, desc, "dtrain report: ", &pos);
  if (vm.count("help") || files.empty()) {
    std::cout << desc;
    return files.empty() && !vm.count("help") ? kExitUsage : kExitOk;
  }
  if (!(link_gbps > 0) || !std::isfinite(link_gbps))
    DT_USAGE("dtrain report: option 'link-gbps': ", link_gbps, " must be > 0");
  if (!(latency_us >= 0) || !std::isfinite(latency_us))
    DT_USAGE("dtrain report: option 'latency-us': ", latency_us, " must be ≥ 0");
  if (steps < 1) DT_USAGE("dtrain report: option 'profile-steps': ", steps, " must be ≥ 1");
  const bool have_profile = !profile_path.empty();
  double bg_given = -1;  // ≥ 0: a number given
  if (background != "run" && background != "profile") {
    const char* end = background.data() + background.size();
    auto [ptr, ec] = std::from_chars(background.data(), end, bg_given);
    if (ec != std::errc() || ptr != end || !(bg_given >= 0) || !std::isfinite(bg_given))
      DT_USAGE("dtrain report: option 'background': '", background, "' is not run, profile or a number ≥ 0 (cores)");
  }
  if (background == "profile" && !have_profile)
    DT_USAGE("dtrain report: option 'background': 'profile' needs option 'profile'");
  std::vector<MeasuredRun> runs;
  for (const auto& f : files) runs.push_back(read_run(f));
  Profile prof;
  if (have_profile) prof = read_profile(profile_path);
  // The background of the prediction for run r.
  auto background_of = [&](const MeasuredRun& r) {
    if (bg_given >= 0) return bg_given;
    if (background == "profile") return prof.nearest(r.minibatch).background;
    return r.background;
  };

  perf::Links given;
  given.intra = given.inter = {link_gbps * 1e9 / 8, latency_us * 1e-6};
  // Runs the profile does not apply to: a profile of one point measured here, in-process.
  std::map<std::string, Profile> local;  // "model/minibatch/threads/cores" → that profile
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
    const int x = r.minibatch;
    const Profile* use = &prof;
    const bool from_profile = have_profile && prof.model == r.model && prof.threads == s.threads;
    if (!from_profile) {
      if (have_profile) {
        std::string why = prof.model != r.model ? "model " + r.model + " ≠ profile's " + prof.model
                                                : "threads " + std::to_string(s.threads) + " ≠ profile's " +
                                                      std::to_string(prof.threads);
        not_profiled.push_back(r.file + ": " + why + ": its T_C1 was measured in-process here (profile's links kept)");
      }
      const std::string key = r.model + "/" + std::to_string(x) + "/" + std::to_string(s.threads);
      if (!local.count(key)) {
        TrainConfig cfg;
        cfg.model = r.model;
        cfg.train_data = train_data;
        Profile q;
        q.model = r.model;
        q.threads = s.threads;
        q.cores = r.cores;
        measure_memory(r.model, 0, q);
        ComputePoint c;
        c.minibatch = x;
        c.t_c = measure_step_time(cfg, x, steps, s.threads);
        c.samples = {c.t_c};
        q.points = {c};
        q.links = have_profile ? prof.links : given;
        if (have_profile) {  // the machine's poll cost, measured by tune
          q.poll_period = prof.poll_period;
          q.poll_fraction = prof.poll_fraction;
        }
        local[key] = q;
      }
      use = &local[key];
    }
    const Placement where = Placement::on_machine(r.cores, background_of(r));
    const perf::StepPrediction p = predict_run(*use, x, s, where);
    const double sp = predicted_speedup(*use, x, s, where);
    Group* g = nullptr;
    for (auto& q : groups)
      if (q.model == r.model && q.mode == r.mode && q.x == x && q.shape.workers == s.workers &&
          q.shape.servers == s.servers && q.shape.ranks_per_node == s.ranks_per_node &&
          q.shape.threads == s.threads && q.shape.sleeping_waits == s.sleeping_waits)
        g = &q;
    if (!g) {
      groups.push_back({});
      g = &groups.back();
      g->model = r.model;
      g->mode = r.mode;
      g->shape = s;
      g->x = x;
      g->cores = r.cores;
      g->from_profile = from_profile;
    }
    ++g->n;
    g->files.push_back(r.file);
    g->step.push_back(r.step);
    g->t_c.push_back(r.t_c);
    g->bg += where.background;
    g->pred.t_c += p.t_c;
    g->pred.t_o += p.t_o;
    g->pred.t_step += p.t_step;
    g->pred_speedup += sp;
  }
  for (auto& g : groups) {
    g.bg /= g.n;
    g.pred.t_c /= g.n;
    g.pred.t_o /= g.n;
    g.pred.t_step /= g.n;
    g.pred_speedup /= g.n;
  }

  std::string source = "T_C1 measured in-process";
  if (have_profile) {
    source = "profile " + profile_path;
    if (!not_profiled.empty())
      source += "; " + std::to_string(not_profiled.size()) + " of " + std::to_string(runs.size()) +
                " run(s) with T_C1 measured in-process";
  }
  int misses = 0;
  nlohmann::json out_groups = nlohmann::json::array();
  if (!json)
    std::printf("%-28s %2s %-8s %-9s %2s %2s %2s %4s %3s %-5s | %8s %8s %6s %8s %5s | %8s %8s %8s %5s | %6s %5s\n",
                "run", "n", "model", "mode", "G", "Np", "K", "X", "thr", "wait", "T_C ms", "T_O ms", "R_O", "step ms",
                "S", "T_C ms", "T_O ms", "step ms", "S", "err %", "bg");
  for (const auto& g : groups) {
    const double step = median(g.step), t_c = median(g.t_c), t_o = std::max(0.0, step - t_c);
    // Measured speedup: against the 1-worker group of the same model and minibatch
    // in the list with the fewest servers (the run without any exchange if given).
    const Group* base = nullptr;
    for (const auto& b : groups)
      if (b.shape.workers == 1 && b.model == g.model && b.x == g.x && (!base || b.shape.servers < base->shape.servers))
        base = &b;
    const double s_meas = base ? g.shape.workers * median(base->step) / step : 0.0;
    const double err = (g.pred.t_step - step) / step;
    if (std::fabs(err) > 0.15) ++misses;
    if (json) {
      out_groups.push_back(
          {{"files", g.files}, {"n", g.n}, {"model", g.model}, {"mode", g.mode}, {"workers", g.shape.workers},
           {"servers", g.shape.servers}, {"ranks_per_node", g.shape.ranks_per_node}, {"minibatch", g.x},
           {"threads", g.shape.threads}, {"wait", g.shape.sleeping_waits ? "sleep" : "spin"}, {"cores", g.cores},
           {"background", g.bg}, {"from_profile", g.from_profile},
           {"measured", {{"t_c_s", t_c}, {"t_o_s", t_o}, {"step_s", step},
                         {"speedup", base ? nlohmann::json(s_meas) : nlohmann::json(nullptr)}}},
           {"predicted", {{"t_c_s", g.pred.t_c}, {"t_o_s", g.pred.t_o}, {"step_s", g.pred.t_step},
                          {"speedup", g.pred_speedup}}},
           {"error", err}});
      continue;
    }
    const std::string& file = g.files.front();
    std::string name = file.size() > 28 ? "…" + file.substr(file.size() - 26) : file;
    std::printf("%-28s %2d %-8s %-9s %2d %2d %2d %4d %3d %-5s | %8.2f %8.2f %6.3f %8.2f %5.2f | %8.2f %8.2f %8.2f %5.2f | %+6.1f %5.2f\n",
                name.c_str(), g.n, g.model.c_str(), g.mode.c_str(), g.shape.workers, g.shape.servers,
                g.shape.ranks_per_node, g.x, g.shape.threads, g.shape.sleeping_waits ? "sleep" : "spin", 1e3 * t_c,
                1e3 * t_o, t_c > 0 ? t_o / t_c : 0.0, 1e3 * step, s_meas, 1e3 * g.pred.t_c, 1e3 * g.pred.t_o,
                1e3 * g.pred.t_step, g.pred_speedup, 100 * err, g.bg);
  }
  if (json) {
    nlohmann::json out = {{"kind", "report"}, {"predicted_by", "engine/predict.cpp predict_run (on this machine)"},
                          {"source", source}, {"groups", out_groups}, {"not_profiled", not_profiled},
                          {"outside_15_percent", misses},
                          {"background", background}};
    std::printf("%s\n", out.dump(1).c_str());
    return kExitOk;
  }
  for (const auto& w : not_profiled) std::printf("not from the profile: %s\n", w.c_str());
  std::printf("measured: medians over log intervals (first dropped), then over the n runs of a configuration;\n"
              "  T_O = step − T_C; S = G·step(1 worker)/step(G) against the 1-worker run in the list (0.00: none).\n"
              "predicted: engine/predict.cpp on this machine, the code of dtrain tune's tables (%s),\n"
              "  mean over the n runs; S against the model's 1 worker alone;\n"
              "  bg = cores used by other jobs during the runs (mean)%s.\n"
              "When ranks outnumber cores, measured T_C is rank 0's own compute time and predicted T_C the\n"
              "  whole job's compute phase: compare the step times (docs/performance-model.md §6).\n"
              "%d of %zu configuration(s) outside ±15%% (step time).\n",
              source.c_str(), background == "run" ? "" : (", here as --background " + background).c_str(), misses,
              groups.size());
  return kExitOk;
}

}  // namespace dtrain::engine
