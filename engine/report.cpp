// engine/report.cpp — the run record (appended by `dtrain train`) and its
// reader for `dtrain report` (engine/report_cmd.cpp).
#include "engine/report.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include <nlohmann/json.hpp>

#include "comm/wait.hpp"
#include "core/error.hpp"
#include "core/format.hpp"
#include "engine/metrics.hpp"    // MetricsWriter::append_record
#include "engine/train_job.hpp"  // choose_thread_counts
#include "engine/tune_profile.hpp"

namespace dtrain::engine {

namespace {

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

}  // namespace

std::string cannot_open(const std::string& path, int err) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string why = std::strerror(err);
  if (err == ENOENT && fs::is_symlink(path, ec))  // a loop is ELOOP, its own words
    why = "a symbolic link to '" + format::visible(fs::read_symlink(path, ec).string()) + "', which does not exist";
  return "cannot open '" + format::visible(path) + "'" +
         (fs::path(path).is_absolute() ? "" : " (relative to " + fs::current_path(ec).string() + ")") + ": " + why;
}

std::ifstream open_input(const std::string& path, const char* key) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    DT_USAGE("dtrain report: option '", key, "': '", format::visible(path), "' is a folder, not a file");
  std::ifstream f(path);
  if (!f) DT_USAGE("dtrain report: option '", key, "': ", cannot_open(path, errno));
  return f;
}

MeasuredRun read_run(const std::string& path) {
  std::ifstream f = open_input(path, "metrics");
  MeasuredRun r;
  r.file = path;
  // A run is one or more starts: each start stopped on a signal writes a run
  // record that ends "checkpointed" and the next start (a requeued job,
  // --metrics-append) continues the run; a record ending otherwise closes it.
  std::vector<double> st, tc, ips;        // the step records of the last run
  std::vector<double> tc_next, ips_next;  // step records since the last run record
  int runs = 0;           // runs in the file: more than one were appended or joined
  bool open_run = false;  // the last run record ended "checkpointed"
  nlohmann::json rec;     // the last run record
  std::string failed;  // the error of the last {"kind":"failed"} record
  int failed_line = 0;
  int rec_line = 0, n = 0;
  std::string line;
  while (std::getline(f, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      // A last line without a newline: a record cut by a killed writer (the
      // records before it are whole; --metrics-append cuts it off too).
      if (f.eof()) {
        std::fprintf(stderr, "dtrain report: warning: %s:%d: a cut last line (no newline, not JSON) is left out\n",
                     path.c_str(), n);
        break;
      }
      if (n == 1) {  // a whole JSON document: a tune profile given as --metrics?
        std::ifstream whole(path);
        const nlohmann::json doc = nlohmann::json::parse(whole, nullptr, /*allow_exceptions=*/false);
        if (doc.is_object() && doc.contains("kind") && doc["kind"] == "profile")
          DT_USAGE("dtrain report: ", path, " is a profile written by dtrain tune, not a metrics file: give it "
                   "with --profile (--metrics takes the JSON Lines files of dtrain train)");
      }
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
      if (!open_run) {  // this record's steps begin a run of their own: earlier steps are another run's
        ++runs;
        ips.clear();
        tc.clear();
      }
      ips.insert(ips.end(), ips_next.begin(), ips_next.end());
      tc.insert(tc.end(), tc_next.begin(), tc_next.end());
      ips_next.clear();
      tc_next.clear();
      const auto end = j.find("end");
      open_run = end != j.end() && end->is_string() && *end == "checkpointed";
      rec = std::move(j);
      rec_line = n;
    } else if (*kind == "failed") {
      auto e = j.find("error");
      failed = e != j.end() && e->is_string() && !e->get<std::string>().empty() ? e->get<std::string>()
                                                                               : std::string("(no message)");
      failed_line = n;
    } else if (*kind == "step") {
      const Record s{j, path, n, "step"};
      ips_next.push_back(s.number("images_per_s", 0, true));
      tc_next.push_back(s.number("t_compute_s", 0, false));
    }
  }
  if (rec.is_null() && !failed.empty())
    DT_USAGE("dtrain report: ", path, " is of a run that failed, with no {\"kind\":\"run\"} record: ", failed);
  if (rec.is_null())
    DT_USAGE("dtrain report: ", path, " has no {\"kind\":\"run\"} record (written when a run finishes)");
  // --metrics-append: a start that failed after an earlier one finished (a
  // requeued Slurm job): the earlier run record is not this file's result.
  if (failed_line > rec_line)
    DT_USAGE("dtrain report: ", path, ":", failed_line, ": the last start of this run failed, after the run record of line ",
             rec_line, ": ", failed);
  // Runs appended to one file (--metrics-append with another run, or files
  // joined with cat): the last run is the file's result, its steps only.
  if (runs > 1)
    std::fprintf(stderr, "dtrain report: note: %s holds %d runs (run records not ending \"checkpointed\"); only the "
                 "last, whose record is at line %d, and its step records are reported\n", path.c_str(), runs, rec_line);
  if (open_run) {  // a later start of the checkpointed run that wrote no record (killed): the same run
    ips.insert(ips.end(), ips_next.begin(), ips_next.end());
    tc.insert(tc.end(), tc_next.begin(), tc_next.end());
  } else if (!ips_next.empty()) {
    std::fprintf(stderr, "dtrain report: note: %s: %zu step record(s) after the last run record (a start that did not "
                 "finish) are left out\n", path.c_str(), ips_next.size());
  }
  const Record q{rec, path, rec_line, "run"};
  r.model = q.text("model");
  const std::string mode = q.text("mode");
  const comm::Mode modes[] = {comm::Mode::allreduce, comm::Mode::ps, comm::Mode::hybrid};
  auto known = std::find_if(std::begin(modes), std::end(modes), [&](comm::Mode m) { return mode == comm::mode_name(m); });
  if (known == std::end(modes)) q.bad("mode", "is '", mode, "', must be allreduce, ps or hybrid");
  r.mode = *known;
  r.minibatch = q.integer("minibatch", 1);
  r.workers = q.integer("workers", 1);
  r.servers = q.integer("servers", 0);
  if (r.mode != comm::Mode::allreduce && r.servers < 1) q.bad("servers", "is ", r.servers, ", mode ", mode, " needs ≥ 1");
  r.ranks_per_node = q.integer("ranks_per_node", 0);
  // Runs on real nodes: K from the workers' hosts (records of older runs have no such field).
  if (r.ranks_per_node == 0 && q.j.contains("workers_per_node")) r.ranks_per_node = q.integer("workers_per_node", 0);
  r.threads = q.integer("threads", 1);  // a run computes on ≥ 1 thread (0 made the model's demand 0)
  r.cores = q.number("cores", 0, true);
  const double zero = 0;
  r.background = q.number("background_cores", 0, false, &zero);
  // Records before the field spun; any other value than sleep reads as spin.
  r.wait_policy = q.text("wait_policy", "spin") == "sleep" ? comm::WaitPolicy::sleep : comm::WaitPolicy::spin;
  r.stand_in_ms = q.number("compute_stand_in_ms", 0, false, &zero);  // absent: a real run
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
  if (r.t_c > 1.05 * r.step)
    std::fprintf(stderr, "dtrain report: warning: %s: the median t_compute_s (%.3g s) exceeds the step time from "
                 "images_per_s (%.3g s): the records disagree (edited, or another run's?); T_O is shown as 0\n",
                 path.c_str(), r.t_c, r.step);
  r.ips = median(ips);
  return r;
}

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
  // The topology's count (no collective here: the exchange and watchdog threads still live).
  const int nodes = std::max(1, r.nodes);
  // K of the prediction's shape: the virtual nodes', else the real nodes' when even (0: all on one node).
  const int workers_per_node = cfg.ranks_per_node > 0           ? cfg.ranks_per_node
                               : nodes > 1 && workers % nodes == 0 ? workers / nodes
                                                                   : 0;
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  // The threads each rank computed with: the trainer's rule (choose_thread_counts).
  const int threads = choose_thread_counts(cfg, size).compute;
  nlohmann::json rec = {
      {"kind", "run"}, {"model", cfg.model}, {"minibatch", cfg.minibatch},
      {"mode", comm::mode_name(size > 1 ? cfg.mode : comm::Mode::allreduce)}, {"workers", workers}, {"servers", cfg.ps},
      {"ranks_per_node", cfg.ranks_per_node}, {"nodes", nodes}, {"workers_per_node", workers_per_node},
      {"threads", threads}, {"precision", layers::precision_name(cfg.precision)},
      {"world_size", size}, {"cores", cores}, {"steps", r.steps}, {"images_per_s", r.images_per_s},
      {"wall_s", wall}, {"job_cpu_s", job}, {"machine_busy_s", busy},
      {"background_cores", busy > 0 && wall > 0 ? std::max(0.0, (busy - job) / wall) : 0.0},
      {"load_1m_start", c.load0}, {"wait_policy", comm::wait_policy_name(comm::wait_policy())},
      // A run that resumed trained from resumed_from_step; one stopped on a
      // signal ends "checkpointed" (exit 75), else "done".
      {"resumed_from_step", r.resumed_from_step}, {"end", r.requeue ? "checkpointed" : "done"}};
  if (cfg.compute_stand_in_ms > 0) rec["compute_stand_in_ms"] = cfg.compute_stand_in_ms;
  MetricsWriter::append_record(cfg.metrics, rec);
}

}  // namespace dtrain::engine
