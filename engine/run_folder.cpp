// engine/run_folder.cpp — see run_folder.hpp.
#include "engine/run_folder.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>  // NAME_MAX
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/format.hpp"
#include "engine/metrics.hpp"  // is_metrics_line, metrics_tail
#include "io/checkpoint.hpp"      // CheckpointStore::writes_name
#include "engine/options.hpp"  // visible, is_control_character

namespace dtrain::engine {

namespace fs = std::filesystem;

namespace {

bool is_auto(const std::string& v) { return v == kAutoOutput; }

// The nearest folder at or above `p` that exists. Throws UsageError when a
// component on the way is not a folder (e.g. an output under a regular file).
fs::path nearest_existing_folder(const fs::path& p, const char* key, const std::string& shown,
                                 const std::string& where = "") {
  fs::path a = fs::absolute(p).lexically_normal();
  std::error_code ec;
  while (!a.empty()) {
    auto st = fs::status(a, ec);
    if (fs::exists(st)) {
      if (!fs::is_directory(st))
        DT_USAGE(where, "option '", key, "': '", shown, "' cannot be created: '", a.string(), "' is not a folder");
      return a;
    }
    if (a == a.root_path()) break;
    a = a.parent_path();
  }
  return fs::current_path();
}

// Proves that `dir` takes a new file now, leaving nothing behind.
void probe_writable(const fs::path& dir, const char* key, const std::string& shown, const std::string& where = "") {
  fs::path probe = dir / (".dtrain-probe." + std::to_string(::getpid()));
  std::FILE* f = std::fopen(probe.c_str(), "w");
  if (f == nullptr)
    DT_USAGE(where, "option '", key, "': '", shown, "' cannot be written: cannot create files in '", dir.string(), "' (",
             std::strerror(errno), ")");
  std::fclose(f);
  std::error_code ec;
  fs::remove(probe, ec);
}

bool same_file(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec)) return true;
  return fs::absolute(a).lexically_normal() == fs::absolute(b).lexically_normal();
}

// An explicit output file: not an input, not an existing file (unless overwrite), a folder that takes it.
// reserved: check_new_output's (metrics is opened in place: 0).
void check_explicit(const TrainConfig& cfg, const char* key, const std::string& out,
                    size_t reserved = kTemporarySuffixBytes) {
  for (auto [ikey, in] : {std::pair<const char*, std::string>{"train-data", cfg.train_data},
                          {"test-data", cfg.test_data}, {"job", cfg.job}})
    if (same_file(out, in))
      DT_USAGE("option '", key, "': '", out, "' is the same file as option '", ikey, "'; refusing to overwrite an input");
  check_new_output("", key, out, cfg.overwrite,
                   "choose another file, leave the option out (each run then writes into its own run folder)", reserved);
}

}  // namespace

void check_new_output(const std::string& where, const char* key, const std::string& out, bool overwrite,
                      const std::string& alternative, size_t reserved) {
  std::error_code ec;
  // A name that fits alone, but not with the suffix of the temporary written
  // beside it, failed after all the work ("File name too long" once a whole
  // training had run): refused first.
  const std::string name = fs::path(out).filename().string();
  if (name.size() + reserved > NAME_MAX)
    DT_USAGE(where, "option '", key, "': the file name '", visible(name.substr(0, 40)), "…' is ", name.size(),
             " bytes long, and a name written beside it adds up to ", reserved, " bytes (a temporary ",
             "'….tmp.<pid>' or a partial file) where a file name may have ", NAME_MAX,
             " bytes: shorten it by ", name.size() + reserved - NAME_MAX, " bytes or more");
  auto st = fs::symlink_status(out, ec);
  if (fs::exists(st)) {
    if (fs::is_symlink(st))  // not followed: a rename would replace the link, an append write through it
      DT_USAGE(where, "option '", key, "': '", visible(out), "' is a symbolic link (to '",
               visible(fs::read_symlink(out, ec).string()), "'): give the file itself");
    if (!fs::is_regular_file(st))
      DT_USAGE(where, "option '", key, "': '", out, "' exists and is not a regular file (a device, a FIFO, a folder): ",
               "outputs are written to regular files only; give another path, or \"\" for none");
    if (!overwrite)
      DT_USAGE(where, "option '", key, "': '", out, "' exists (an earlier run's output?); refusing to overwrite it: ",
               alternative, ", or pass --overwrite true");
  }
  fs::path parent = fs::path(out).parent_path();
  probe_writable(nearest_existing_folder(parent.empty() ? fs::path(".") : parent, key, out, where), key, out, where);
}

void check_output_folder(const std::string& where, const char* key, const std::string& path) {
  const fs::path dir = fs::path(path).parent_path();
  std::error_code ec;
  if (dir.empty() || fs::is_directory(fs::status(dir, ec))) return;
  const std::string head = where + "option '" + key + "': the folder '" + visible(dir.string()) + "' of " + visible(path);
  const fs::file_status link = fs::symlink_status(dir, ec);
  if (fs::is_symlink(link))
    DT_USAGE(head, " is a link to '", visible(fs::read_symlink(dir, ec).string()), "', which is not a folder");
  if (fs::exists(link)) DT_USAGE(head, " is not a folder");
  DT_USAGE(head, " does not exist: make it first");
}

namespace {

fs::path run_parent(const TrainConfig& cfg) { return fs::path(cfg.runs_dir) / run_name(cfg); }

// --metrics-append: a file that exists must be a metrics file (any other had
// its last line cut and records appended: a README, a notes file). Every line
// is checked before any rank starts work (a refusal by the writer came after
// the failure recorder, which then wrote into the refused file): a whole line
// must be a record or blank, a last line without its newline one that
// MetricsWriter completes or cuts (metrics_tail).
void check_metrics_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return;  // absent: created; unreadable: the writer names the error
  std::string line;
  for (int64_t n = 1; std::getline(f, line); ++n) {
    const bool whole = !f.eof();
    if (whole ? is_metrics_line(line) : metrics_tail(line) != MetricsTail::foreign) continue;
    DT_USAGE("option 'metrics': '", visible(path), "' exists and is not a metrics file (its line ", n, ", '",
             visible(line.substr(0, 60)), line.size() > 60 ? "…" : "",
             "', is not a {\"kind\": …} record", whole ? "" : " nor the start of one cut by a killed writer",
             "): --metrics-append continues a metrics file only; give another file");
  }
}

}  // namespace

std::string run_name(const TrainConfig& cfg) {
  if (!cfg.run_name.empty()) return cfg.run_name;
  if (!cfg.job.empty()) return fs::path(cfg.job).stem().string();
  return "train";
}

void check_outputs(const TrainConfig& cfg) {
  const bool any_auto = is_auto(cfg.metrics) || is_auto(cfg.save_params) || is_auto(cfg.timeline);
  if (!is_auto(cfg.metrics) && !cfg.metrics.empty()) {
    if (cfg.metrics_append) {  // an existing file is continued, not replaced
      TrainConfig appending = cfg;
      appending.overwrite = true;
      check_explicit(appending, "metrics", cfg.metrics, 0);
      check_metrics_file(cfg.metrics);
    } else {
      check_explicit(cfg, "metrics", cfg.metrics, 0);
    }
  }
  if (!is_auto(cfg.save_params) && !cfg.save_params.empty()) check_explicit(cfg, "save-params", cfg.save_params);
  if (!is_auto(cfg.timeline) && !cfg.timeline.empty()) check_explicit(cfg, "timeline", cfg.timeline);
  if (!cfg.metrics.empty() && !is_auto(cfg.metrics) && same_file(cfg.metrics, cfg.save_params))
    DT_USAGE("options 'metrics' and 'save-params' name the same file '", cfg.metrics, "'");
  for (auto [key, other] : {std::pair<const char*, std::string>{"metrics", cfg.metrics}, {"save-params", cfg.save_params}})
    if (!cfg.timeline.empty() && !is_auto(cfg.timeline) && !is_auto(other) && same_file(cfg.timeline, other))
      DT_USAGE("options 'timeline' and '", key, "' name the same file '", cfg.timeline, "'");
  if (any_auto) {
    const std::string name = run_name(cfg);
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        std::any_of(name.begin(), name.end(), is_control_character))
      DT_USAGE("option 'run-name': '", visible(name), "' is not a plain folder name");
    if (name.size() > NAME_MAX)  // it failed after start-up as "File name too long"
      DT_USAGE("option 'run-name': '", visible(name.substr(0, 40)), "…' is ", name.size(), " bytes long, more than the ",
               NAME_MAX, " a folder name may have");
    if (cfg.runs_dir.empty())
      DT_USAGE("option 'runs-dir': is empty but an output is left at its default (auto) run folder; give a folder, "
               "or set the outputs explicitly (--metrics F / --save-params F, \"\" for none)");
    const std::string shown = run_parent(cfg).string();
    probe_writable(nearest_existing_folder(run_parent(cfg), "runs-dir", shown), "runs-dir", shown);
    // The checkpoint folder against the run folders (helpers' findings): as
    // their parent, the runs' `latest` link and the checkpoints' `latest` file
    // replaced each other (--resume auto skipped it, the lock was lost);
    // through that link, checkpoints landed in whichever run folder it named;
    // as the runs-dir, a run named like a checkpoint entry failed after training.
    if (!cfg.checkpoint_dir.empty()) {
      const fs::path ck = fs::absolute(cfg.checkpoint_dir).lexically_normal();
      const fs::path via = (fs::absolute(run_parent(cfg)) / "latest").lexically_normal();
      if (std::mismatch(via.begin(), via.end(), ck.begin(), ck.end()).first == via.end())
        DT_USAGE("option 'checkpoint-dir': '", visible(cfg.checkpoint_dir), "' goes through the run folders' 'latest' ",
                 "link (", visible(via.string()), "), which names another run folder at every start: give the ",
                 "checkpoints a folder of their own (e.g. ", visible((run_parent(cfg) / "checkpoints").string()), ")");
      if (same_file(cfg.checkpoint_dir, cfg.runs_dir) && io::CheckpointStore::writes_name(name))
        DT_USAGE("option 'run-name': '", visible(name), "' is a name the checkpoints write in option 'checkpoint-dir' ('",
                 visible(cfg.checkpoint_dir), "', also the runs-dir): choose another run name or checkpoint folder");
      if (same_file(cfg.checkpoint_dir, shown))
        DT_USAGE("option 'checkpoint-dir': '", visible(cfg.checkpoint_dir), "' is the folder of this job's run folders (",
                 "runs-dir/run-name = ", visible(shown), "), where the runs' 'latest' link and the checkpoints' "
                 "'latest' file would replace each other: give the checkpoints a folder of their own (e.g. ",
                 visible((run_parent(cfg) / "checkpoints").string()), ")");
    }
  }
}

RunOutputs make_outputs(const TrainConfig& cfg) {
  RunOutputs o;
  o.metrics = is_auto(cfg.metrics) ? std::string() : cfg.metrics;
  o.save_params = is_auto(cfg.save_params) ? std::string() : cfg.save_params;
  o.timeline = is_auto(cfg.timeline) ? std::string() : cfg.timeline;
  std::error_code ec;
  for (const std::string& f : {o.metrics, o.save_params, o.timeline}) {
    fs::path parent = fs::path(f).parent_path();
    if (!f.empty() && !parent.empty() && !fs::create_directories(parent, ec) && ec)
      DT_FAIL("cannot create the folder '", parent.string(), "': ", ec.message());
  }
  if (!is_auto(cfg.metrics) && !is_auto(cfg.save_params) && !is_auto(cfg.timeline)) return o;

  const fs::path parent = run_parent(cfg);
  fs::create_directories(parent, ec);
  if (ec) DT_FAIL("cannot create the runs folder '", parent.string(), "': ", ec.message());
  long next = 1;
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    const std::string n = e.path().filename().string();
    if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos || n.size() > 9) continue;
    next = std::max(next, std::stol(n) + 1);
  }
  fs::path dir;
  const long first = next;
  for (;; ++next) {  // mkdir is the lock: a number taken by a run started at the same time is skipped
    dir = parent / std::to_string(next);
    if (::mkdir(dir.c_str(), 0777) == 0) break;
    if (errno != EEXIST) DT_FAIL("cannot create the run folder '", dir.string(), "': ", std::strerror(errno));
    // Never an endless loop (a path that mkdir reads otherwise, such as one cut
    // by a NUL, exists whatever the number): 1000 runs started at once is beyond any job.
    if (next - first >= 1000)
      DT_FAIL("cannot create a run folder in '", parent.string(), "': ", first, " to ", next, " all exist");
  }
  // latest → n, replaced atomically (a relative link, so the folder can be moved).
  const fs::path tmp = parent / (".latest." + std::to_string(::getpid()));
  fs::remove(tmp, ec);
  if (::symlink(std::to_string(next).c_str(), tmp.c_str()) != 0 || ::rename(tmp.c_str(), (parent / "latest").c_str()) != 0) {
    fs::remove(tmp, ec);
    DT_FAIL("cannot point '", (parent / "latest").string(), "' at the run folder: ", std::strerror(errno));
  }
  o.dir = dir.string();
  if (is_auto(cfg.metrics)) o.metrics = (dir / "metrics.jsonl").string();
  if (is_auto(cfg.save_params)) o.save_params = (dir / "params.h5").string();
  if (is_auto(cfg.timeline)) o.timeline = (dir / "timeline.json").string();
  return o;
}

}  // namespace dtrain::engine
