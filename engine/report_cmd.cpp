// engine/report_cmd.cpp — `dtrain report`: finished runs measured against the
// prediction of engine/predict.hpp (the code of `dtrain tune`'s tables), as a
// table or, with --json, as one JSON object (slurm/report plots from it).
#include <algorithm>
#include <charconv>
#include <boost/program_options.hpp>
#include <sys/stat.h>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "engine/options.hpp"
#include "core/format.hpp"
#include "engine/metrics.hpp"  // is_metrics_line
#include "engine/predict.hpp"
#include "engine/report.hpp"
#include "engine/tune_profile.hpp"

namespace po = boost::program_options;

namespace dtrain::engine {

namespace {

Profile read_profile(const std::string& path) {
  std::ifstream f = open_input(path, "profile");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    std::ifstream again(path);
    std::string first;
    std::getline(again, first);
    if (is_metrics_line(first) && !first.empty())  // a train metrics file (JSON Lines) given as the profile
      DT_USAGE("dtrain report: option 'profile': ", path, " is a metrics file of dtrain train (JSON Lines), not a "
               "profile: give it with --metrics (--profile takes OUT.profile.json of dtrain tune)");
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
  std::string model;
  comm::Mode mode = comm::Mode::allreduce;
  perf::RunShape shape;
  int x = 0, n = 0;
  bool from_profile = true;
  std::vector<double> step, t_c;
  double bg = 0, cores = 1;
  double stand_in_ms = 0;     // > 0: compute stand-in runs (never grouped with real ones)
  perf::StepPrediction pred;  // summed, then averaged
  double pred_speedup = 0;    // likewise
};

// The command line of `dtrain report`, checked.
struct ReportOptions {
  std::vector<std::string> files;
  std::string profile_path, train_data;
  std::string background = "run";  // as given (printed back)
  enum class Background { run, profile, given } bg = Background::run;
  double bg_given = -1;  // Background::given: cores
  double link_gbps = 40, latency_us = 5;
  int steps = 10;
  bool json = false;
  std::string placement = "machine";  // machine | cluster (Placement, engine/predict.hpp)
  bool cluster() const { return placement == "cluster"; }
  bool have_profile() const { return !profile_path.empty(); }
};

// Parses and checks args; returns an exit code when there is nothing to report
// (--help, no files), else nullopt.
std::optional<int> parse_report_options(const std::vector<std::string>& args, ReportOptions& o) {
  using format::shortest;
  po::options_description desc(
      "dtrain report --metrics run1.jsonl [run2.jsonl ...] [--profile tuned.profile.json] [--json]");
  desc.add_options()("help,h", "this help")(
      "metrics", po::value(&o.files)->multitoken(), "metrics files of finished runs (JSON Lines with a run record)")(
      "profile", po::value(&o.profile_path), "profile written by dtrain tune (T_C, links); else T_C is measured here")(
      "background", po::value(&o.background)->default_value(o.background),
      "cores other jobs use, for the prediction: run (each run's measured), profile (the load while "
      "profiling: what dtrain tune's table for this machine assumed) or a number")(
      "placement", po::value(&o.placement)->default_value(o.placement),
      "where the prediction puts the ranks: machine (this machine's cores shared by every rank, its "
      "background load) or cluster (every rank on its own cores, the profile's links: nodes of an "
      "emulated or real cluster; with compute stand-in runs, T_C is the profile's, e.g. tune --t-c-ms)")(
      "json", po::bool_switch(&o.json), "print one JSON object (configurations, measured, predicted) instead of the table")(
      "train-data", po::value(&o.train_data), "without --profile: images for the in-process T_C measurement")(
      "link-gbps", po::value(&o.link_gbps)->default_value(o.link_gbps, shortest(o.link_gbps)),
      "without --profile: link bandwidth, Gb/s")(
      "latency-us", po::value(&o.latency_us)->default_value(o.latency_us, shortest(o.latency_us)),
      "without --profile: per-message latency, µs")(
      "profile-steps", po::value(&o.steps)->default_value(o.steps), "without --profile: steps per T_C measurement");
  po::positional_options_description pos;
  pos.add("metrics", -1);
  po::variables_map vm = parse_command_line(args, desc, "dtrain report: ", &pos);
  if (vm.count("help") || o.files.empty()) {
    std::cout << desc;
    return o.files.empty() && !vm.count("help") ? kExitUsage : kExitOk;
  }
  if (!(o.link_gbps > 0) || !std::isfinite(o.link_gbps))
    DT_USAGE("dtrain report: option 'link-gbps': ", o.link_gbps, " must be > 0");
  if (!(o.latency_us >= 0) || !std::isfinite(o.latency_us))
    DT_USAGE("dtrain report: option 'latency-us': ", o.latency_us, " must be ≥ 0");
  if (o.steps < 1) DT_USAGE("dtrain report: option 'profile-steps': ", o.steps, " must be ≥ 1");
  if (o.placement != "machine" && o.placement != "cluster")
    DT_USAGE("dtrain report: option 'placement': '", o.placement, "' is not machine or cluster");
  if (o.background == "profile") {
    o.bg = ReportOptions::Background::profile;
  } else if (o.background != "run") {
    o.bg = ReportOptions::Background::given;
    const char* end = o.background.data() + o.background.size();
    auto [ptr, ec] = std::from_chars(o.background.data(), end, o.bg_given);
    if (ec != std::errc() || ptr != end || !(o.bg_given >= 0) || !(o.bg_given <= 1e6))
      DT_USAGE("dtrain report: option 'background': '", o.background,
               "' is not run, profile or a number of cores in [0, 1000000]");
  }
  if (o.bg == ReportOptions::Background::profile && !o.have_profile())
    DT_USAGE("dtrain report: option 'background': 'profile' needs option 'profile'");
  return std::nullopt;
}

// The prediction of each run: from the profile when it applies (same model and
// threads), else from a profile of one point measured here, in-process (one
// per model/minibatch/threads, kept). Remembers the runs the profile did not
// apply to, and why.
class RunPredictor {
 public:
  explicit RunPredictor(const ReportOptions& o) : o_(o) {
    if (o.have_profile()) prof_ = read_profile(o.profile_path);
    given_.intra = given_.inter = {o.link_gbps * 1e9 / 8, o.latency_us * 1e-6};
  }
  // What the profile was given instead of measuring, for the source line: ""
  // if it measured everything. T_C given: a what-if profile (dtrain tune
  // --t-c-ms); links given: --link-gbps, or tune's defaults without mpirun.
  std::string given_in_profile() const {
    if (!o_.have_profile()) return "";
    std::string g;
    if (prof_.t_c_given) g = "a what-if profile: T_C given (dtrain tune --t-c-ms), not measured on this machine";
    if (prof_.links_source == "given")
      g += std::string(g.empty() ? "" : "; ") + "its links given (--link-gbps, or tune's defaults without mpirun), not measured";
    return g;
  }

  struct Result {
    perf::RunShape shape;
    Placement where;
    perf::StepPrediction step;
    double speedup = 0;
    bool from_profile = true;
  };
  Result predict(const MeasuredRun& r) {
    Result out;
    perf::RunShape& s = out.shape;
    s.mode = r.mode;
    s.workers = r.workers;
    s.servers = r.servers;
    s.ranks_per_node = r.ranks_per_node;
    s.threads = std::max(1, r.threads);
    s.sleeping_waits = r.wait_policy == comm::WaitPolicy::sleep;
    // A profile whose T_C was given (dtrain tune --t-c-ms) holds at any thread count; a
    // measured one only at the threads it was measured with.
    out.from_profile = o_.have_profile() && prof_.model == r.model && (prof_.t_c_given || prof_.threads == s.threads);
    const Profile& use = out.from_profile ? prof_ : local_profile(r, s.threads);
    out.where = o_.cluster() ? Placement::on_cluster() : Placement::on_machine(r.cores, background_of(r));
    out.step = predict_run(use, r.minibatch, s, out.where);
    out.speedup = predicted_speedup(use, r.minibatch, s, out.where);
    return out;
  }
  const std::vector<std::string>& not_profiled() const { return not_profiled_; }

 private:
  // The background of the prediction for run r.
  double background_of(const MeasuredRun& r) const {
    if (o_.bg == ReportOptions::Background::given) return o_.bg_given;
    if (o_.bg == ReportOptions::Background::profile) return prof_.nearest(r.minibatch).background;
    return r.background;
  }
  const Profile& local_profile(const MeasuredRun& r, int threads) {
    const int x = r.minibatch;
    if (o_.have_profile()) {
      std::string why = prof_.model != r.model ? "model " + r.model + " ≠ profile's " + prof_.model
                                               : "threads " + std::to_string(threads) + " ≠ profile's " +
                                                     std::to_string(prof_.threads);
      not_profiled_.push_back(r.file + ": " + why + ": its T_C1 was measured in-process here (profile's links kept)");
    }
    const std::string key = r.model + "/" + std::to_string(x) + "/" + std::to_string(threads);
    if (!local_.count(key)) {
      TrainConfig cfg;
      cfg.model = r.model;
      cfg.train_data = o_.train_data;
      Profile q;
      q.model = r.model;
      q.threads = threads;
      q.cores = r.cores;
      measure_memory(r.model, 0, q);
      ComputePoint c;
      c.minibatch = x;
      c.t_c = measure_step_time(cfg, x, o_.steps, threads);
      c.samples = {c.t_c};
      q.points = {c};
      q.links = o_.have_profile() ? prof_.links : given_;
      if (o_.have_profile()) {  // the machine's poll cost, measured by tune
        q.poll_period = prof_.poll_period;
        q.poll_fraction = prof_.poll_fraction;
      }
      local_[key] = q;
    }
    return local_[key];
  }

  const ReportOptions& o_;
  Profile prof_;
  perf::Links given_;
  std::map<std::string, Profile> local_;  // "model/minibatch/threads" → that profile
  std::vector<std::string> not_profiled_;
};

// Runs grouped by configuration, each with its measured runs and the mean prediction.
std::vector<Group> group_runs(const std::vector<MeasuredRun>& runs, RunPredictor& predictor) {
  std::vector<Group> groups;
  for (const auto& r : runs) {
    const RunPredictor::Result p = predictor.predict(r);
    const perf::RunShape& s = p.shape;
    const int x = r.minibatch;
    Group* g = nullptr;
    for (auto& q : groups)
      if (q.model == r.model && q.mode == r.mode && q.x == x && q.shape.workers == s.workers &&
          q.shape.servers == s.servers && q.shape.ranks_per_node == s.ranks_per_node &&
          q.shape.threads == s.threads && q.shape.sleeping_waits == s.sleeping_waits && q.stand_in_ms == r.stand_in_ms)
        g = &q;
    if (!g) {
      groups.push_back({});
      g = &groups.back();
      g->model = r.model;
      g->mode = r.mode;
      g->shape = s;
      g->x = x;
      g->cores = r.cores;
      g->stand_in_ms = r.stand_in_ms;
      g->from_profile = p.from_profile;
    }
    ++g->n;
    g->files.push_back(r.file);
    g->step.push_back(r.step);
    g->t_c.push_back(r.t_c);
    g->bg += p.where.background;
    g->pred.t_c += p.step.t_c;
    g->pred.t_o += p.step.t_o;
    g->pred.t_step += p.step.t_step;
    g->pred_speedup += p.speedup;
  }
  for (auto& g : groups) {
    g.bg /= g.n;
    g.pred.t_c /= g.n;
    g.pred.t_o /= g.n;
    g.pred.t_step /= g.n;
    g.pred_speedup /= g.n;
  }
  return groups;
}

// A group as measured: medians over its runs, and the speedup against the
// 1-worker group of the same model and minibatch in the list with the fewest
// servers (the run without any exchange if given; none: no speedup).
struct Measured {
  double step = 0, t_c = 0, t_o = 0, speedup = 0, error = 0;
  bool has_base = false;
};
Measured measured(const Group& g, const std::vector<Group>& groups) {
  Measured m;
  m.step = median(g.step);
  m.t_c = median(g.t_c);
  m.t_o = std::max(0.0, m.step - m.t_c);
  const Group* base = nullptr;
  for (const auto& b : groups)
    if (b.shape.workers == 1 && b.model == g.model && b.x == g.x && (!base || b.shape.servers < base->shape.servers))
      base = &b;
  m.has_base = base != nullptr;
  m.speedup = base ? g.shape.workers * median(base->step) / m.step : 0.0;
  m.error = (g.pred.t_step - m.step) / m.step;
  return m;
}

nlohmann::json group_json(const Group& g, const Measured& m) {
  return {{"files", g.files}, {"n", g.n}, {"model", g.model}, {"mode", comm::mode_name(g.mode)},
          {"workers", g.shape.workers}, {"servers", g.shape.servers}, {"ranks_per_node", g.shape.ranks_per_node},
          {"minibatch", g.x}, {"threads", g.shape.threads}, {"wait", g.shape.sleeping_waits ? "sleep" : "spin"},
          {"cores", g.cores}, {"background", g.bg}, {"from_profile", g.from_profile},
          {"compute_stand_in_ms", g.stand_in_ms > 0 ? nlohmann::json(g.stand_in_ms) : nlohmann::json(nullptr)},
          {"measured", {{"t_c_s", m.t_c}, {"t_o_s", m.t_o}, {"step_s", m.step},
                        {"speedup", m.has_base ? nlohmann::json(m.speedup) : nlohmann::json(nullptr)}}},
          {"predicted", {{"t_c_s", g.pred.t_c}, {"t_o_s", g.pred.t_o}, {"step_s", g.pred.t_step},
                         {"speedup", g.pred_speedup}}},
          {"error", m.error}};
}

void print_table_header() {
  std::printf("%-28s %2s %-8s %-9s %2s %2s %2s %4s %3s %-5s | %8s %8s %6s %8s %5s | %8s %8s %8s %5s | %6s %5s\n",
              "run", "n", "model", "mode", "G", "Np", "K", "X", "thr", "wait", "T_C ms", "T_O ms", "R_O", "step ms",
              "S", "T_C ms", "T_O ms", "step ms", "S", "err %", "bg");
}

// The row's name: the file as typed, or, when the path goes through a symbolic
// link (a run folder's `latest`), where the link leads (relative to the working
// folder when below it), so two rows never both read `…/latest/metrics.jsonl`.
// The links are resolved before "..", as the system does ("L/../2" with L a
// link to runs/a/1 is runs/a/2).
std::string row_name(const std::string& typed) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path abs = fs::absolute(typed, ec);
  if (ec) return typed;
  const fs::path real = fs::canonical(abs, ec);
  if (ec || real == abs.lexically_normal()) return typed;
  const fs::path rel = real.lexically_relative(fs::current_path(ec));
  if (!ec && !rel.empty() && *rel.begin() != "..") return rel.string();
  return real.string();
}

// `name` for a table column `width` characters wide (UTF-8: a character is
// one column, whatever its bytes): control bytes as \xNN (a newline in a file
// name split the row), a longer name cut to "…" and its last width − 1
// characters, shorter ones padded with spaces.
std::string column_text(const std::string& name, size_t width) {
  std::vector<std::string> chars;  // one UTF-8 character each
  for (size_t i = 0; i < name.size();) {
    const auto b = static_cast<unsigned char>(name[i]);
    size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xe ? 3 : (b >> 3) == 0x1e ? 4 : 1;
    if (i + len > name.size()) len = 1;
    for (size_t k = 1; k < len; ++k)  // a lead byte without its continuation bytes is a stray byte
      if ((static_cast<unsigned char>(name[i + k]) & 0xc0) != 0x80) len = 1;
    std::string c = name.substr(i, len);
    if (len == 1 && (b < 0x20 || b >= 0x7f)) c = visible(c);  // a control or stray byte
    // \xNN takes 4 columns: counted as 4 one-column characters.
    if (c.size() > 1 && c[0] == '\\') for (char x : c) chars.emplace_back(1, x);
    else chars.push_back(c);
    i += len;
  }
  std::string out;
  if (chars.size() > width) {
    out = "…";
    for (size_t k = chars.size() - (width - 1); k < chars.size(); ++k) out += chars[k];
  } else {
    for (const auto& c : chars) out += c;
    out.append(width - chars.size(), ' ');
  }
  return out;
}

void print_table_row(const Group& g, const Measured& m) {
  const std::string name = column_text(row_name(g.files.front()), 28);
  std::printf("%s %2d %-8s %-9s %2d %2d %2d %4d %3d %-5s | %8.2f %8.2f %6.3f %8.2f %5.2f | %8.2f %8.2f %8.2f %5.2f | %+6.1f %5.2f\n",
              name.c_str(), g.n, g.model.c_str(), comm::mode_name(g.mode), g.shape.workers, g.shape.servers,
              g.shape.ranks_per_node, g.x, g.shape.threads, g.shape.sleeping_waits ? "sleep" : "spin", 1e3 * m.t_c,
              1e3 * m.t_o, m.t_c > 0 ? m.t_o / m.t_c : 0.0, 1e3 * m.step, m.speedup, 1e3 * g.pred.t_c,
              1e3 * g.pred.t_o, 1e3 * g.pred.t_step, g.pred_speedup, 100 * m.error, g.bg);
}

}  // namespace

int cmd_report(const std::vector<std::string>& args) {
  ReportOptions o;
  if (std::optional<int> code = parse_report_options(args, o)) return *code;
  std::vector<MeasuredRun> runs;
  // A file given twice counts once: `runs/NAME/*/metrics.jsonl` also matches
  // latest/, which gave the newest run twice the weight in the medians.
  // The same file is the same device and inode (a hard link too).
  std::vector<std::pair<std::pair<dev_t, ino_t>, std::string>> seen;  // (device, inode), as typed
  for (const auto& f : o.files) {
    struct stat st{};
    if (::stat(f.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      const std::pair<dev_t, ino_t> id{st.st_dev, st.st_ino};
      const auto same = std::find_if(seen.begin(), seen.end(), [&](const auto& p) { return p.first == id; });
      if (same != seen.end()) {
        std::fprintf(stderr, "dtrain report: '%s' is the file '%s' already given: counted once\n",
                     visible(f).c_str(), visible(same->second).c_str());
        continue;
      }
      seen.emplace_back(id, f);
    }
    runs.push_back(read_run(f));
  }
  RunPredictor predictor(o);
  const std::vector<Group> groups = group_runs(runs, predictor);
  const std::vector<std::string>& not_profiled = predictor.not_profiled();

  std::string source = "T_C1 measured in-process";
  if (o.have_profile()) {
    source = "profile " + o.profile_path;
    if (const std::string g = predictor.given_in_profile(); !g.empty())
      source += ", " + g;
    if (!not_profiled.empty())
      source += "; " + std::to_string(not_profiled.size()) + " of " + std::to_string(runs.size()) +
                " run(s) with T_C1 measured in-process";
  }
  int misses = 0;
  nlohmann::json out_groups = nlohmann::json::array();
  if (!o.json) print_table_header();
  for (const auto& g : groups) {
    const Measured m = measured(g, groups);
    if (std::fabs(m.error) > 0.15) ++misses;
    if (o.json) out_groups.push_back(group_json(g, m));
    else print_table_row(g, m);
  }
  if (o.json) {
    nlohmann::json out = {{"kind", "report"}, {"predicted_by", std::string("engine/predict.cpp predict_run (") + (o.cluster() ? "on a cluster" : "on this machine") + ")"},
                          {"placement", o.placement},
                          {"source", source}, {"groups", out_groups}, {"not_profiled", not_profiled},
                          {"outside_15_percent", misses},
                          {"background", o.background}};
    std::printf("%s\n", out.dump(1).c_str());
    return kExitOk;
  }
  for (const auto& w : not_profiled) std::printf("not from the profile: %s\n", w.c_str());
  for (const auto& g : groups)
    if (g.stand_in_ms > 0)
      std::printf("compute stand-in: %s%s: %s ms per step replaced forward and backward (no model was trained): "
                  "its measured T_C is the stand-in's; its predicted T_C is a what-if profile's given T_C "
                  "(plus T_U in allreduce mode), else the model's own compute measured here\n",
                  g.files.front().c_str(), g.n > 1 ? " (and its repeats)" : "", format::shortest(g.stand_in_ms).c_str());
  std::printf("measured: medians over log intervals (first dropped), then over the n runs of a configuration;\n"
              "  T_O = step − T_C; S = G·step(1 worker)/step(G) against the 1-worker run in the list (0.00: none).\n"
              "predicted: engine/predict.cpp %s, the code of dtrain tune's tables (%s),\n"
              "  mean over the n runs; S against the model's 1 worker alone;\n"
              "  bg = cores used by other jobs during the runs (mean)%s.\n"
              "When ranks outnumber cores, measured T_C is rank 0's own compute time and predicted T_C the\n"
              "  whole job's compute phase: compare the step times (docs/performance-model.md §6).\n"
              "%d of %zu configuration(s) outside ±15%% (step time).\n",
              o.cluster() ? "on a cluster (--placement cluster)" : "on this machine", source.c_str(),
              o.bg == ReportOptions::Background::run ? "" : (", here as --background " + o.background).c_str(),
              misses, groups.size());
  return kExitOk;
}

}  // namespace dtrain::engine
