// engine/predict.cpp — predict_run and the prediction tables of predict.hpp.
#include "engine/predict.hpp"

#include <algorithm>
#include <cstdio>

#include "comm/wait.hpp"
#include "core/error.hpp"

namespace dtrain::engine {

namespace {

std::string printf_text(const char* f, double a) {
  char b[64];
  std::snprintf(b, sizeof b, f, a);
  return b;
}

nlohmann::json entry_json(const perf::RunShape& s, const perf::StepPrediction& p, double speedup) {
  return {{"mode", comm::mode_name(s.mode)}, {"workers", s.workers}, {"servers", s.servers},
          {"ranks_per_node", s.ranks_per_node}, {"threads", s.threads},
          {"wait", s.sleeping_waits ? "sleep" : "spin"}, {"t_c_s", p.t_c}, {"t_o_s", p.t_o}, {"step_s", p.t_step},
          {"speedup", speedup}};
}

// One row of a table (see TableRow); t_c: the profile's median T_C at x (the server rule's T_C).
TableRow make_row(const Profile& p, int x, int g, int k, const Placement& where, double t_c) {
  TableRow r;
  r.g = g;
  r.nodes = (g + k - 1) / k;
  const double bw = p.links.inter.bandwidth;
  r.sender_ok = perf::sender_link_ok(p.param_bytes, bw, t_c);
  r.ps_servers = perf::ps_count(g, p.param_bytes, bw, t_c);
  r.hybrid_servers = perf::ps_count(r.nodes, p.param_bytes, bw, t_c);
  if (!r.sender_ok) {  // servers beyond one per sender do not help when the sender's own link is the bottleneck
    r.ps_servers = std::min(r.ps_servers, g);
    r.hybrid_servers = std::min(r.hybrid_servers, r.nodes);
  }
  auto shape = [&](comm::Mode mode, int servers) {
    perf::RunShape s;
    s.mode = mode;
    s.workers = g;
    s.servers = servers;
    s.ranks_per_node = k;
    s.threads = p.threads;
    s.param_bytes = p.param_bytes;
    s.sleeping_waits = !where.cluster && auto_sleeps_on(s, where.cores);
    return s;
  };
  r.ps = shape(comm::Mode::ps, r.ps_servers);
  r.hybrid = shape(comm::Mode::hybrid, r.hybrid_servers);
  r.allreduce = shape(comm::Mode::allreduce, 0);
  const double one = predict_run(p, x, single_worker(r.allreduce), where).t_step;
  r.ps_pred = predict_run(p, x, r.ps, where);
  r.hybrid_pred = predict_run(p, x, r.hybrid, where);
  r.allreduce_pred = predict_run(p, x, r.allreduce, where);
  r.ps_speedup = g * one / r.ps_pred.t_step;
  r.hybrid_speedup = g * one / r.hybrid_pred.t_step;
  r.allreduce_speedup = g * one / r.allreduce_pred.t_step;
  r.byteps_t = g >= 2 ? perf::byteps_time(g, r.ps_servers, p.param_bytes, bw) : 0.0;
  return r;
}

}  // namespace

perf::StepPrediction predict_run(const Profile& p, int x, perf::RunShape s, const Placement& where) {
  s.param_bytes = p.param_bytes;
  // T_U: the local update where workers update (allreduce), when the profile's T_C excludes it.
  const double t_u = s.mode == comm::Mode::allreduce ? p.update_s : 0.0;
  perf::MachineLoad m;
  if (where.cluster) {
    // Every rank on its own cores: ρ ≤ 1, so κ = 1, no time sharing, no wake-up wait;
    // the exchange overlaps backward (the share kBackwardShare of T_C without T_U).
    m.cores = static_cast<double>(s.workers + s.servers) * std::max(1, s.threads);
    s.sleeping_waits = false;
    const double t_c = p.t_c_at(x);
    s.overlap = perf::kBackwardShare * t_c / (t_c + t_u);
    return perf::predict_step(std::vector<double>{t_c + t_u}, s, p.links, m);
  }
  m.cores = where.cores;
  m.background = where.background;
  m.poll_period = p.poll_period > 0 ? p.poll_period : comm::kSleepMaxS;
  m.poll_fraction = p.poll_period > 0 ? p.poll_fraction : 0.0;
  m.time_share = p.time_share_at(x);
  std::vector<double> samples = p.samples_at(x);
  for (double& v : samples) v += t_u;
  return perf::predict_step(samples, s, p.links, m);
}

perf::RunShape single_worker(const perf::RunShape& s) {
  perf::RunShape one;
  one.threads = s.threads;
  one.param_bytes = s.param_bytes;
  return one;  // allreduce, 1 worker, no server, spinning: exchanges nothing
}

double predicted_speedup(const Profile& p, int x, const perf::RunShape& s, const Placement& where) {
  return s.workers * predict_run(p, x, single_worker(s), where).t_step / predict_run(p, x, s, where).t_step;
}

bool auto_sleeps_on(const perf::RunShape& s, double cores) {
  return comm::choose_wait_policy("auto", s.workers + s.servers, std::max(1, s.threads),
                                  std::max(1, static_cast<int>(cores))) == comm::WaitPolicy::sleep;
}

PredictionTable prediction_table(const Profile& p, int x, int nodes, int k, const Placement& where) {
  DT_CHECK(nodes >= 1 && k >= 1 && x >= 1, "prediction_table: nodes ", nodes, ", per node ", k, ", X ", x);
  PredictionTable t;
  t.where = where;
  t.minibatch = x;
  t.nodes = nodes;
  t.workers_per_node = k;
  t.threads = p.threads;
  const double t_c = p.t_c_at(x);
  for (int g = 1; g <= nodes * k; ++g) t.rows.push_back(make_row(p, x, g, k, where, t_c));
  return t;
}

const perf::StepPrediction& TableRow::prediction(comm::Mode m) const {
  return m == comm::Mode::hybrid ? hybrid_pred : m == comm::Mode::ps ? ps_pred : allreduce_pred;
}

double TableRow::speedup(comm::Mode m) const {
  return m == comm::Mode::hybrid ? hybrid_speedup : m == comm::Mode::ps ? ps_speedup : allreduce_speedup;
}

int largest_workers(const Profile& p, int x, int k, comm::Mode mode, double target, const Placement& where,
                    int limit) {
  DT_CHECK(where.cluster, "largest_workers: cluster placement only (a machine's samples make it slow)");
  const double t_c = p.t_c_at(x);
  int best = 0;
  for (int g = 1; g <= limit; ++g) {
    const TableRow r = make_row(p, x, g, k, where, t_c);
    if (r.speedup(mode) / g >= target) best = g;
  }
  return best;
}

nlohmann::json PredictionTable::to_json() const {
  nlohmann::json rows_j = nlohmann::json::array();
  for (const auto& r : rows)
    rows_j.push_back({{"workers", r.g}, {"nodes", r.nodes}, {"sender_ok", r.sender_ok}, {"byteps_s", r.byteps_t},
                      {"ps", entry_json(r.ps, r.ps_pred, r.ps_speedup)},
                      {"hybrid", entry_json(r.hybrid, r.hybrid_pred, r.hybrid_speedup)},
                      {"allreduce", entry_json(r.allreduce, r.allreduce_pred, r.allreduce_speedup)}});
  return {{"placement", where.cluster ? "cluster" : "machine"}, {"cores", where.cores},
          {"background", where.background}, {"minibatch", minibatch}, {"nodes", nodes},
          {"workers_per_node", workers_per_node}, {"threads", threads}, {"rows", rows_j}};
}

std::string table_text(const PredictionTable& t, const Profile& p, const std::string& worker) {
  std::string o;
  auto line = [&](const std::string& s) { o += s + "\n"; };
  const std::string shape = std::to_string(t.nodes) + " node(s) × " + std::to_string(t.workers_per_node) + " worker(s)";
  const ComputePoint& q = p.nearest(t.minibatch);
  if (t.where.cluster) {
    line("Predicted on a hypothetical cluster, NOT this machine: " + shape + ", each worker on its own " + worker +
         ", each server on its own core(s); no other jobs, no time sharing, spinning waits.");
    line("  T_C " + printf_text("%.2f", 1e3 * p.t_c_at(t.minibatch)) + " ms per worker at X_mini " +
         std::to_string(t.minibatch) + " (the profile's median, no stragglers); links " + p.links_source + ".");
  } else {
    std::string terms = "  " + std::to_string(t.threads) + " thread(s) per worker; T_C1 drawn from the steps of " +
                        std::to_string(std::max<size_t>(1, q.process_t_c.size())) +
                        " profiled process(es) (stragglers); time sharing η " + printf_text("%.3f", q.time_share);
    if (p.poll_period > 0)
      terms += "; waits sleep when ranks × threads > cores (a poll every " + printf_text("%.0f", 1e6 * p.poll_period) +
               " µs, " + printf_text("%.1f", 100 * p.poll_fraction) + "% of a core)";
    line("Predicted on this machine (what `dtrain report --profile` predicts for these runs here): " + shape +
         " as virtual nodes (--ranks-per-node " + std::to_string(t.workers_per_node) + "), every rank sharing " +
         printf_text("%.0f", t.where.cores) + " core(s) with " + printf_text("%.2f", t.where.background) +
         " core(s) of other jobs (as while profiling).");
    line(terms + ".");
  }
  line("  ms per step; S = G·step(1 worker alone)/step(G), α = S/G; N_ps = ⌈2·senders·P/(B·T_C)⌉ (senders: ps G, "
       "hybrid the nodes); " +
       std::string(t.where.cluster ? "the exchange overlaps backward (2/3 of T_C): allreduce's all but its last "
                                     "bucket, ps's and hybrid's pushes only (the pulls follow)"
                                   : "the exchange is not overlapped (shared cores)") +
       (p.update_s > 0 ? "; allreduce T_C includes the local update T_U " + printf_text("%.2f", 1e3 * p.update_s) + " ms" : std::string()) +
       " (engine/predict.hpp).");
  char b[256];
  std::snprintf(b, sizeof b, "%4s %5s | %4s %8s %8s %6s | %4s %8s %8s %6s | %8s %8s %6s%s", "G", "nodes", "Nps",
                "ps T_O", "ps step", "S", "Nps", "hy T_O", "hy step", "S", "ar T_O", "ar step", "S",
                t.where.cluster ? " | BytePS ms" : "");
  line(b);
  for (const auto& r : t.rows) {
    std::snprintf(b, sizeof b, "%4d %5d | %4d %8.2f %8.2f %6.2f | %4d %8.2f %8.2f %6.2f | %8.2f %8.2f %6.2f", r.g,
                  r.nodes, r.ps_servers, 1e3 * r.ps_pred.t_o, 1e3 * r.ps_pred.t_step, r.ps_speedup, r.hybrid_servers,
                  1e3 * r.hybrid_pred.t_o, 1e3 * r.hybrid_pred.t_step, r.hybrid_speedup, 1e3 * r.allreduce_pred.t_o,
                  1e3 * r.allreduce_pred.t_step, r.allreduce_speedup);
    std::string s = b;
    if (t.where.cluster) s += printf_text(" | %9.2f", 1e3 * r.byteps_t);
    line(s);
  }
  return o;
}

}  // namespace dtrain::engine
