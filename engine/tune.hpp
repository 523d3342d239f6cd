// engine/tune.hpp — `dtrain tune` (engine/tune.cpp, engine/tune_run.cpp) and
// its pure piece, the job-file writer (the prediction tables: engine/predict.hpp).
// Units: seconds, bytes, bytes/second. Model: DESIGN.md §4, perfmodel.hpp.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "engine/config.hpp"

namespace dtrain::engine {

struct TuneOptions {
  int nodes = 1, workers_per_node = 1;  // --workers-per-node (alias --gpus-per-node)
  double link_gbps = 0, intra_gbps = 0, latency_us = -1;  // 0 / −1: measure
  double memory_gb = 0;                                    // 0: host RAM / workers per node
  double target_efficiency = 0.8, knee = 0.05;
  std::vector<int> candidates;
  int profile_steps = 5;
  double t_c_ms = 0;  // > 0: T_C per step at the job's minibatch is given (what-if), not measured
  double t_u_ms = 0;  // with t_c_ms: a worker's local update T_U (ms); < 0: measured here (Profile::update_s)
  int base_batch = 0;
  double max_lr_scale = 4;  // the linear rule's factor is capped here (large-batch divergence)
  // The modes the tuned job may take (--modes): the one of them with the best
  // predicted speedup on the cluster at G = nodes × workers-per-node (ties:
  // hybrid, then ps, then allreduce); hybrid only with nodes and workers per
  // node both > 1; G = 1 is always allreduce.
  std::vector<comm::Mode> modes = {comm::Mode::ps, comm::Mode::hybrid, comm::Mode::allreduce};
  bool hybrid_possible() const { return nodes > 1 && workers_per_node > 1; }  // nodes of more than one worker
  std::string out = "tuned.ini";
  bool overwrite = false;  // replace an existing OUT and OUT.profile.json
};

// The full job file (every key of TrainConfig; empty strings omitted) that
// `dtrain train --job` reads back to the same configuration.
std::string job_file_text(const TrainConfig& c);

// The job's inputs checked as train checks them, before any profiling, in
// measuring and what-if mode alike: its datasets (train-data and test-data
// opened, their images through the loader's transforms fit for the model's
// input, their classes), mean/std, every candidate's global batch at most the
// training set, no value holding '#'. Returns the training set's class count
// (0: no train-data). Throws UsageError (exit 2) naming the option.
int check_tune_job(const TuneOptions& t, const TrainConfig& cfg);

// Writes the tuned job file `out` and its profile OUT.profile.json, each whole
// or not at all (io/synced_file.hpp): both are written and fsynced under
// "<name>.tmp.<pid>" first, then moved into place, the profile first and the
// job file last. Throws Error naming the file and the system's reason when a
// write fails (a full disk), neither name touched and no temporary left; without
// `overwrite`, UsageError naming the file when either name exists by then
// (another tune with the same --out), the other left as it was.
void write_tune_outputs(const std::string& out, const std::string& job_text, const std::string& profile_text,
                        bool overwrite);

// Profiles on this machine (collective over `world`), prints, writes the job file.
int run_tune(const TuneOptions& t, TrainConfig cfg, MPI_Comm world);
int cmd_tune(const std::vector<std::string>& args);

}  // namespace dtrain::engine
