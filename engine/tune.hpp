// engine/tune.hpp — `dtrain tune` (engine/tune.cpp, engine/tune_run.cpp) and
// its pure pieces: the cluster prediction table and the job-file writer.
// Units: seconds, bytes, bytes/second. Model: DESIGN.md §4, perfmodel.hpp.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "engine/config.hpp"
#include "engine/perfmodel.hpp"

namespace dtrain::engine {

struct TuneOptions {
  int nodes = 1, gpus_per_node = 1;
  double link_gbps = 0, intra_gbps = 0, latency_us = -1;  // 0 / −1: measure
  double memory_gb = 0;                                    // 0: host RAM / workers per node
  double target_efficiency = 0.8, knee = 0.05;
  std::vector<int> candidates;
  int profile_steps = 5;
  double t_c_ms = 0;  // > 0: T_C per step at the job's minibatch is given (what-if), not measured
  int base_batch = 0;
  double max_lr_scale = 4;  // the linear rule's factor is capped here (large-batch divergence)
  std::string out = "tuned.ini";
};

// One row of the cluster prediction for G workers on ⌈G/g⌉ nodes, one worker
// per GPU (no CPU sharing). N_ps from perf::ps_count (senders: G for ps, the
// nodes for hybrid), capped at one server per sender when the sender's link
// cannot carry 2·P within T_C; T_O = max(0, exchange_time − T_C) (the exchange
// hides under the step's compute, the paper's condition), 0 for G = 1;
// α = T_C / (T_C + T_O(G)) (weak scaling: fixed X_mini per worker); S = G·α.
struct ClusterRow {
  int g = 1, nodes = 1;
  int ps_servers = 1, hybrid_servers = 1;
  double ps_t_o = 0, hybrid_t_o = 0, allreduce_t_o = 0, byteps_t = 0;
  double ps_alpha = 1, hybrid_alpha = 1, allreduce_alpha = 1;
  bool sender_ok = true;  // 2·P/B_inter ≤ T_C
};
std::vector<ClusterRow> predict_cluster(double t_c, double param_bytes, const perf::Links& l, int nodes,
                                        int gpus_per_node);

// The full job file (every key of TrainConfig; empty strings omitted) that
// `dtrain train --job` reads back to the same configuration.
std::string job_file_text(const TrainConfig& c);

// Profiles on this machine (collective over `world`), prints, writes the job file.
int run_tune(const TuneOptions& t, TrainConfig cfg, MPI_Comm world);
int cmd_tune(const std::vector<std::string>& args);

}  // namespace dtrain::engine
