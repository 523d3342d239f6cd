// engine/report.hpp — `dtrain report` and the run record it reads.
//
// After a training run, rank 0 appends one line to the metrics file:
//   {"kind":"run", "model", "minibatch", "mode", "workers", "servers",
//    "ranks_per_node", "nodes", "threads", "world_size", "cores",
//    "param_bytes", "steps", "images_per_s", "wall_s",
//    "job_cpu_s"        CPU seconds of all ranks of the job (getrusage),
//    "machine_busy_s"   CPU seconds of the whole machine over the run (/proc/stat),
//    "background_cores" (machine_busy_s − job_cpu_s) / wall_s: cores other jobs used,
//    "load_1m_start"}   1-min load average when the run started.
// `dtrain report --metrics run1.jsonl [...] [--profile P.json]` prints, per run,
// the measured T_C, T_O, R_O, step time (median over log intervals), α and
// speedup (against a 1-worker run of the same model and minibatch in the list),
// next to the model's prediction (perfmodel.hpp predict_step with the profile's
// T_C1 and links; without --profile T_C1 is measured here, in-process) and the
// relative error of the step time. Runs whose model or threads differ from the
// profile's are listed after the table with the reason (their T_C1 measured
// here). Every field report reads is checked: a damaged metrics file or profile
// is a usage error (exit 2) naming the file, the line and the field.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "engine/config.hpp"
#include "engine/trainer.hpp"

namespace dtrain::engine {

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
