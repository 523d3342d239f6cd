// engine/report.hpp — `dtrain report` and the run record it reads.
//
// After a training run, rank 0 appends one line to the metrics file:
//   {"kind":"run", "model", "minibatch", "mode", "workers", "servers",
//    "ranks_per_node", "nodes", "threads", "world_size", "cores",
//    "param_bytes", "steps", "images_per_s", "wall_s",
//    "job_cpu_s"        CPU seconds of all ranks of the job (getrusage),
//    "machine_busy_s"   CPU seconds of the whole machine over the run (/proc/stat),
//    "background_cores" (machine_busy_s − job_cpu_s) / wall_s: cores other jobs used,
//    "load_1m_start"    1-min load average when the run started,
//    "compute_stand_in_ms"}  only in a compute stand-in run (engine/compute_stand_in.hpp).
// `dtrain report --metrics run1.jsonl [...] [--profile P.json] [--background run|profile|B]
// [--json]` (engine/report_cmd.cpp) prints, per configuration, the measured
// T_C, T_O, R_O, step time (median over log intervals) and speedup (against
// the 1-worker run of the same model and minibatch in the list with the fewest
// servers) next to the prediction — engine/predict.hpp predict_run on this
// machine, the code of `dtrain tune`'s tables, with the profile's T_C1 and
// links (without --profile T_C1 is measured here, in-process), each run's own
// background (--background run; or the profile's, as tune's table assumed; or a
// number) — and the relative error of the step time. --json prints
// the same as one JSON object (what slurm/report plots). Runs whose model or
// threads differ from the profile's are listed after the table with the reason
// (their T_C1 measured here). Every field report reads is checked: a damaged
// metrics file or profile is a usage error (exit 2) naming the file, the line
// and the field.
#pragma once

#include <mpi.h>

#include <fstream>
#include <string>
#include <vector>

#include "comm/exchange.hpp"
#include "comm/wait.hpp"
#include "engine/config.hpp"
#include "core/median.hpp"
#include "engine/trainer.hpp"

namespace dtrain::engine {

using ::dtrain::median;  // core/median.hpp

// A finished run as report reads it: the run record's fields, and the medians
// over its log intervals (the first dropped when there are more than two).
struct MeasuredRun {
  std::string file;
  std::string model;
  comm::Mode mode = comm::Mode::allreduce;
  comm::WaitPolicy wait_policy = comm::WaitPolicy::spin;
  int minibatch = 0, workers = 0, servers = 0, ranks_per_node = 0, threads = 0;
  double cores = 0, background = 0;
  double t_c = 0, t_o = 0, step = 0, ips = 0;  // seconds per step; images/s
  double stand_in_ms = 0;  // > 0: a compute stand-in run (its T_C is the stand-in's, not the model's)
  int intervals = 0;
};
// Reads one metrics file (JSON Lines with a run record). Throws UsageError
// naming the file, the line and the field on anything it cannot use.
MeasuredRun read_run(const std::string& path);
// "cannot open 'PATH': why" for a file that failed to open with errno `err`
// (a dangling symbolic link says where it points).
std::string cannot_open(const std::string& path, int err);
// `path` opened for reading; UsageError naming option `key` when it is a
// folder or cannot be opened (with why).
std::ifstream open_input(const std::string& path, const char* key);

// Machine CPU counters at the start of a run (collective bookkeeping helper).
struct RunClock {
  double wall0 = 0;
  double busy0 = 0;  // machine busy CPU seconds (/proc/stat), 0 when unreadable
  double load0 = 0;  // 1-min load average
};
RunClock start_run_clock();
// Collective over `world`: sums the ranks' CPU time; rank 0 appends the run
// record to cfg.metrics (no-op without a metrics file).
void append_run_record(const TrainConfig& cfg, const TrainResult& r, const RunClock& c, MPI_Comm world);

int cmd_report(const std::vector<std::string>& args);

}  // namespace dtrain::engine
