// engine/predict.hpp — the one prediction of a run's step time and speedup.
//
// `dtrain tune` (its cluster table, its table for this machine, the tuned job's
// stated prediction), `dtrain report` (runs measured against it) and, through
// `dtrain report --json`, slurm/report's plotted prediction all call
// predict_run; nothing else turns a profile into a predicted time. The formula
// is perf::predict_step (perfmodel.hpp; docs/performance-model.md §2–3):
//   T_C  = compute_phase(T_C1 samples at X, G, threads, machine)
//   T_C  += T_U in allreduce mode (the workers' local update, when the profile
//           has one: a given T_C excludes it; Profile::update_s)
//   T_O  = exposed_exchange(exchange_time(shape, links)·κ, T_C) + sync_hops(shape)·hop_wait
//   step = T_C + T_O,   S(G) = G·step(1 worker alone)/step(G),   α = S/G
// (weak scaling: fixed minibatch per worker). On a cluster the exchange
// overlaps backward, kBackwardShare of T_C, all but its last bucket; on a
// shared machine it is counted in full (docs/performance-model.md §2, §8).
// Inputs come from a Profile (tune_profile.hpp: T_C1 samples, P, links, η,
// the poll cost of sleeping waits); what differs between a table for a cluster
// and one for this machine is only where the workers run (Placement):
//   cluster  each worker on its own cores (CPU) or GPU, each server on its own
//            cores, no other jobs: κ = 1, no time sharing, waits spin (what
//            the auto wait policy picks there), so no hop wait; the exchange
//            overlaps backward (perf::exposed_exchange); T_C1 = the
//            profile's median at X (the spread between processes of the
//            profiling machine is not carried over to the cluster);
//   machine  the profile's machine: `cores` hardware threads shared by every
//            rank, `background` cores used by other jobs, the T_C1 samples
//            (stragglers), η, and the poll period and CPU share of sleeping waits;
//            no overlap (compute and the exchange share the cores: §2, §6).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/perfmodel.hpp"
#include "engine/tune_profile.hpp"

namespace dtrain::engine {

struct Placement {
  bool cluster = true;    // true: every rank on its own cores / GPU; false: a shared machine
  double cores = 1;       // machine: hardware threads shared by every rank of the run
  double background = 0;  // machine: cores other jobs use meanwhile
  static Placement on_cluster() { return {}; }
  static Placement on_machine(double cores, double background) { return {false, cores, background}; }
};

// Predicted times of one step of `shape` at minibatch x (shape.param_bytes is
// taken from the profile). Throws UsageError when the profile has no T_C point.
perf::StepPrediction predict_run(const Profile& p, int x, perf::RunShape shape, const Placement& where);
// The run of one worker alone (allreduce, no server, no exchange) with the
// same threads: the baseline of the speedup; on a machine its waits spin.
perf::RunShape single_worker(const perf::RunShape& s);
// S(G) = G · step(single_worker) / step(shape), both predicted by predict_run.
double predicted_speedup(const Profile& p, int x, const perf::RunShape& s, const Placement& where);
// What `--wait-policy auto` picks when every rank of `s` runs on one machine of
// `cores` (comm::choose_wait_policy): sleep when ranks × threads > cores.
bool auto_sleeps_on(const perf::RunShape& s, double cores);

// One row of a prediction table: G workers on ⌈G/K⌉ nodes of K, per mode.
// N_ps per mode from the paper's formula perf::ps_count with T_C = the
// profile's median at X (senders: G for ps, the nodes for hybrid), capped at
// one server per sender when the sender's own link cannot carry 2·P within T_C;
// the G = 1 row of ps and hybrid is one worker with its servers.
struct TableRow {
  int g = 1, nodes = 1;
  int ps_servers = 1, hybrid_servers = 1;
  perf::RunShape ps, hybrid, allreduce;          // shapes as predicted (waits included)
  perf::StepPrediction ps_pred, hybrid_pred, allreduce_pred;
  double ps_speedup = 1, hybrid_speedup = 1, allreduce_speedup = 1;
  double byteps_t = 0;    // BytePS's closed form (comparison only: not this engine)
  bool sender_ok = true;  // 2·P/B_inter ≤ T_C
  const perf::StepPrediction& prediction(comm::Mode m) const;  // the mode's entry
  double speedup(comm::Mode m) const;
};
struct PredictionTable {
  Placement where;
  int minibatch = 0, nodes = 1, workers_per_node = 1, threads = 1;
  std::vector<TableRow> rows;  // G = 1 … nodes·workers_per_node
  nlohmann::json to_json() const;
};
// The table for nodes × workers_per_node at minibatch x. Machine tables take
// each shape's waits from auto_sleeps_on.
PredictionTable prediction_table(const Profile& p, int x, int nodes, int workers_per_node, const Placement& where);
// Largest G ≤ limit whose α = S/G stays ≥ target in `mode` with K workers
// per node and N_ps by the rule above; 0 when even G = 1 misses.
int largest_workers(const Profile& p, int x, int workers_per_node, comm::Mode mode, double target,
                    const Placement& where, int limit = 65536);

// Text of a table for `dtrain tune`: a header that says where it holds
// (`worker` names a worker's own device on the cluster, e.g. "1 CPU core"
// or "GPU"), then one line per G.
std::string table_text(const PredictionTable& t, const Profile& p, const std::string& worker);

}  // namespace dtrain::engine
