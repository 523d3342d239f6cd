// engine/perfmodel.cpp — the formulas of perfmodel.hpp.
#include "engine/perfmodel.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/error.hpp"

namespace dtrain::engine::perf {

double efficiency(double r_o, int g) {
  DT_CHECK(r_o >= 0 && g >= 1, "efficiency: R_O ", r_o, " and G ", g);
  return (1.0 + r_o) / (1.0 + g * r_o);
}

double speedup(double r_o, int g) { return g * efficiency(r_o, g); }

double speedup_limit(double r_o) {
  DT_CHECK(r_o >= 0, "speedup_limit: R_O ", r_o);
  return r_o == 0 ? std::numeric_limits<double>::infinity() : (1.0 + r_o) / r_o;
}

int max_workers(double r_o, double target) {
  DT_CHECK(r_o >= 0 && target > 0 && target <= 1, "max_workers: R_O ", r_o, ", target ", target);
  if (r_o == 0) return INT_MAX;
  double g = ((1.0 + r_o) / target - 1.0) / r_o;
  return std::max(1, static_cast<int>(std::floor(g + 1e-9)));
}

int ps_count(int senders, double p, double b_ps, double t_c, bool full_duplex) {
  DT_CHECK(senders >= 1 && p >= 0 && b_ps > 0 && t_c > 0, "ps_count: bad arguments");
  double bytes = (full_duplex ? 1.0 : 2.0) * senders * p;
  return std::max(1, static_cast<int>(std::ceil(bytes / (b_ps * t_c) - 1e-9)));
}

bool sender_link_ok(double p, double b_worker, double t_c) {
  DT_CHECK(p >= 0 && b_worker > 0 && t_c > 0, "sender_link_ok: bad arguments");
  return 2.0 * p / b_worker <= t_c;
}

double ps_exchange_time(int senders, int num_ps, double p, double b_ps, double b_worker) {
  DT_CHECK(senders >= 1 && num_ps >= 1 && b_ps > 0 && b_worker > 0, "ps_exchange_time: bad arguments");
  return std::max(2.0 * senders * p / (num_ps * b_ps), 2.0 * p / b_worker);
}

double ring_allreduce_time(int g, double p, double b) {
  DT_CHECK(g >= 1 && b > 0, "ring_allreduce_time: bad arguments");
  return 2.0 * (g - 1) / g * p / b;
}

double byteps_time(int n, int k, double m, double b) {
  DT_CHECK(n >= 2 && k >= 0 && b > 0, "byteps_time: n ", n, ", k ", k);
  double nn = n;
  return 2.0 * nn * (nn - 1) * m / ((nn * nn + k * nn - 2.0 * k) * b);
}

int choose_minibatch(const std::vector<MinibatchCandidate>& c, double budget, double tolerance) {
  double best = 0;
  for (const auto& x : c)
    if (x.memory_bytes <= budget) best = std::max(best, x.images_per_s);
  int pick = -1;
  for (size_t i = 0; i < c.size(); ++i) {
    const auto& x = c[i];
    if (x.memory_bytes > budget || x.images_per_s < (1.0 - tolerance) * best) continue;
    if (pick < 0 || x.minibatch < c[static_cast<size_t>(pick)].minibatch) pick = static_cast<int>(i);
  }
  return pick;
}

ScaledLr scale_lr(double base_lr, int base_batch, int global_batch, double warmup_epochs) {
  DT_CHECK(base_batch > 0 && global_batch > 0 && base_lr > 0, "scale_lr: bad arguments");
  ScaledLr r;
  r.lr = base_lr * global_batch / base_batch;
  r.warmup_epochs = global_batch > base_batch ? warmup_epochs : 0.0;
  return r;
}

int RunShape::nodes() const {
  return ranks_per_node > 0 ? (workers + ranks_per_node - 1) / ranks_per_node : 1;
}

double cpu_contention(double runnable, double cores) {
  DT_CHECK(runnable >= 0 && cores > 0, "cpu_contention: runnable ", runnable, ", cores ", cores);
  return std::max(1.0, runnable / cores);
}

double exchange_time(const RunShape& r, const Links& l) {
  DT_CHECK(r.workers >= 1 && r.servers >= 0 && r.param_bytes >= 0, "exchange_time: bad run shape");
  const double p = r.param_bytes;
  const int g = r.workers;
  if (r.mode == comm::Mode::allreduce) {
    if (g == 1) return 0;
    const Link& k = r.nodes() > 1 ? l.inter : l.intra;
    return ring_allreduce_time(g, p, k.bandwidth) + 2.0 * (g - 1) * k.latency;
  }
  DT_CHECK(r.servers >= 1, "exchange_time: ps/hybrid without servers");
  auto ps_term = [&](int senders) {
    return ps_exchange_time(senders, r.servers, p, l.inter.bandwidth, l.inter.bandwidth) +
           2.0 * l.inter.latency * senders / r.servers;
  };
  if (r.mode == comm::Mode::ps) return ps_term(g);
  const int k = r.ranks_per_node > 0 ? std::min(r.ranks_per_node, g) : g;
  double intra = k > 1 ? 2.0 * (k - 1) / k * p / l.intra.bandwidth + 2.0 * (k - 1) * l.intra.latency : 0.0;
  return intra + ps_term(r.nodes());
}

int sync_hops(const RunShape& r) {
  auto log2c = [](int n) { return n <= 1 ? 0 : static_cast<int>(std::ceil(std::log2(n) - 1e-9)); };
  if (r.mode == comm::Mode::allreduce) return log2c(r.workers);
  if (r.mode == comm::Mode::ps) return 2;
  const int k = r.ranks_per_node > 0 ? std::min(r.ranks_per_node, r.workers) : r.workers;
  return 2 + 2 * log2c(k);
}

double wakeup_wait(double rho, const MachineLoad& m) {
  if (rho <= 1) return 0;
  double slice = std::max(m.min_granularity, m.sched_latency / rho);
  return (rho - 1) / rho * slice;
}

int waiting_threads(const RunShape& r) {
  if (!r.sleeping_waits || (r.workers == 1 && r.servers == 0)) return 0;
  return r.servers + r.workers;
}

namespace {

constexpr int kPhaseDraws = 4096;  // tuples drawn when n^G is larger (perfmodel.hpp, compute_phase)

// Draw i (0-based) of tuple k: an index into n samples from a counter-based
// generator (splitmix64's finaliser of k·γ' + (i+1)·γ), so tuple k's first G
// draws are the same for every G — the tuples for G+1 extend those for G.
size_t phase_draw(uint64_t k, uint64_t i, size_t n) {
  uint64_t z = (k + 1) * 0xD1B54A32D192ED03ull + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<size_t>((z ^ (z >> 31)) % n);
}

// The max and the sum of each tuple's first `g` draws from `samples`.
struct PhaseTuples {
  std::vector<double> samples;
  int g = 0;
  std::vector<double> max = std::vector<double>(kPhaseDraws, 0.0), sum = std::vector<double>(kPhaseDraws, 0.0);
  void extend_to(int to) {
    for (int k = 0; k < kPhaseDraws; ++k) {
      double mx = max[k], s = sum[k];
      for (int i = g; i < to; ++i) {
        const double v = samples[phase_draw(static_cast<uint64_t>(k), static_cast<uint64_t>(i), samples.size())];
        mx = std::max(mx, v);
        s += v;
      }
      max[k] = mx;
      sum[k] = s;
    }
    g = to;
  }
};

// The tuples of (samples, g), extended from the nearest smaller G drawn
// before on this thread: a table's rows G = 1, 2, … cost O(4096·G) in all
// instead of O(4096·G²) (G = 1024 took 23 s). A few sample sets are kept,
// since one row predicts with two (allreduce's T_C includes T_U). The result
// is the same as drawing afresh (the draws do not depend on G).
const PhaseTuples& phase_tuples(const std::vector<double>& samples, int g) {
  thread_local std::vector<PhaseTuples> kept;
  thread_local size_t next = 0;
  PhaseTuples* hit = nullptr;
  for (auto& c : kept)
    if (c.g <= g && c.samples == samples && (hit == nullptr || c.g > hit->g)) hit = &c;
  if (hit == nullptr) {
    if (kept.size() < 4) {
      kept.emplace_back();
      hit = &kept.back();
    } else {
      hit = &kept[next];
      next = (next + 1) % kept.size();
      *hit = PhaseTuples{};
    }
    hit->samples = samples;
  }
  hit->extend_to(g);
  return *hit;
}

}  // namespace

double compute_phase(const std::vector<double>& t, int g, int thr, const MachineLoad& m, double waiting) {
  DT_CHECK(!t.empty() && g >= 1 && thr >= 1 && m.cores > 0 && m.background >= 0, "compute_phase: bad arguments");
  for (double x : t) DT_CHECK(x > 0 && std::isfinite(x), "compute_phase: T_C sample ", x);
  const double demand = static_cast<double>(g) * thr;
  const double rho = (demand + m.background) / m.cores;
  // Capacity left to the job: with more runnable threads than cores, the
  // background holds its fair share; otherwise it holds the cores it uses (at
  // least the job's own demand is left, since ρ ≤ 1).
  double capacity = rho > 1 ? m.cores * demand / (demand + m.background) : std::max(demand, m.cores - m.background);
  DT_CHECK(waiting >= 0 && m.poll_fraction >= 0 && m.poll_fraction <= 1, "compute_phase: waiting ", waiting,
           ", poll fraction ", m.poll_fraction);
  capacity = std::max(0.1 * capacity, capacity - waiting * m.poll_fraction);
  const double eta = rho > 1 ? m.time_share : 1.0;
  DT_CHECK(eta > 0, "compute_phase: time-share inflation ", eta);
  auto phase = [&](auto&& draw) {
    double mx = 0, sum = 0;
    for (int i = 0; i < g; ++i) {
      const double x = draw(i);
      mx = std::max(mx, x);
      sum += x;
    }
    return std::max(mx, eta * thr * sum / capacity);
  };
  const size_t n = t.size();
  if (n == 1) return std::max(t[0], eta * thr * g * t[0] / capacity);  // every worker draws the one sample
  double tuples = 1;
  for (int i = 0; i < g && tuples <= kPhaseDraws; ++i) tuples *= static_cast<double>(n);
  double total = 0;
  if (tuples <= kPhaseDraws) {  // exact: every tuple of G draws
    const size_t count = static_cast<size_t>(tuples);
    for (size_t k = 0; k < count; ++k) {
      size_t c = k;  // tuple k: worker i draws digit i of k in base n (phase draws i = 0, 1, … in order)
      total += phase([&](int) {
        const double v = t[c % n];
        c /= n;
        return v;
      });
    }
    return total / static_cast<double>(count);
  }
  const PhaseTuples& d = phase_tuples(t, g);
  const double coef = eta * thr / capacity;
  for (int k = 0; k < kPhaseDraws; ++k) total += std::max(d.max[k], coef * d.sum[k]);
  return total / kPhaseDraws;
}

double exposed_exchange(double t_comm, double t_c, const RunShape& r) {
  DT_CHECK(r.overlap >= 0 && r.overlap <= 1 && r.bucket_bytes > 0, "exposed_exchange: overlap ", r.overlap,
           ", bucket ", r.bucket_bytes, " B");
  if (r.overlap == 0 || t_comm <= 0) return t_comm;
  const double v = r.mode == comm::Mode::allreduce ? t_comm : t_comm / 2;
  const double tail = r.param_bytes > 0 ? v * std::min(1.0, r.bucket_bytes / r.param_bytes) : v;
  return (t_comm - v) + std::max(v - r.overlap * t_c, tail);
}

double hop_wait(bool sleeping, double rho, const MachineLoad& m) {
  return sleeping ? m.poll_period / 2 : wakeup_wait(rho, m);
}

StepPrediction predict_step(double t_c1, const RunShape& r, const Links& l, const MachineLoad& m) {
  DT_CHECK(t_c1 > 0, "predict_step: T_C ", t_c1);
  return predict_step(std::vector<double>{t_c1}, r, l, m);
}

StepPrediction predict_step(const std::vector<double>& t_c1, const RunShape& r, const Links& l,
                            const MachineLoad& m) {
  DT_CHECK(!t_c1.empty(), "predict_step: no T_C sample");
  StepPrediction s;
  const double rho = (r.workers * r.threads + m.background) / m.cores;
  s.contention = cpu_contention(r.workers * r.threads + m.background, m.cores);
  s.t_c = compute_phase(t_c1, r.workers, r.threads, m, waiting_threads(r));
  s.t_comm = exchange_time(r, l) * s.contention;
  s.t_o = exposed_exchange(s.t_comm, s.t_c, r) + sync_hops(r) * hop_wait(r.sleeping_waits, rho, m);
  s.t_step = s.t_c + s.t_o;
  return s;
}

}  // namespace dtrain::engine::perf
