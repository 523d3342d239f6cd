// engine/perfmodel.hpp — the performance model of distributed training
// (DESIGN.md §4), as pure functions. Notation of Zou et al., "Distributed
// Training Large-Scale Deep Architectures" (2017): G workers (GPUs), X_mini
// minibatch per worker, T_C compute time per iteration (seconds), T_O
// non-overlapped overhead per iteration (seconds), R_O = T_O / T_C, P bytes of
// parameters, B bandwidths in bytes/second. Every function throws Error on
// arguments outside its domain (negative times, zero workers).
#pragma once

#include <cstdint>
#include <vector>

#include "comm/exchange.hpp"  // comm::Mode

namespace dtrain::engine::perf {

// Efficiency when the overhead grows with G (all workers share the PS links),
// Zou et al. 2017 (Amdahl's law applied to distributed training):
//   α(G) = (1 + R_O) / (1 + G·R_O)
double efficiency(double r_o, int g);
// Speedup S(G) = G·α(G); it saturates at (1 + R_O)/R_O as G → ∞.
double speedup(double r_o, int g);
double speedup_limit(double r_o);  // (1 + R_O)/R_O (infinity when R_O = 0)
// Largest G whose efficiency stays ≥ target:  G ≤ ((1 + R_O)/α* − 1)/R_O
// (solving α(G) ≥ α* for G). Returns INT32_MAX when R_O = 0.
int max_workers(double r_o, double target_efficiency);

// Parameter servers needed so that the exchange hides under compute
// (reconstructed, DESIGN.md §4): each of G senders pushes P gradient bytes and
// pulls P parameter bytes per iteration over N_ps servers of bandwidth B_ps:
//   2·G·P / (N_ps·B_ps) ≤ T_C   ⇒   N_ps = ⌈2·G·P / (B_ps·T_C)⌉
// full duplex (push and pull at once): N_ps = ⌈G·P / (B_ps·T_C)⌉. In hybrid
// mode G is the number of nodes (only node leaders send). At least 1.
int ps_count(int senders, double param_bytes, double ps_bandwidth, double t_c, bool full_duplex = false);
// The sender's own link must carry 2·P per iteration within T_C.
bool sender_link_ok(double param_bytes, double worker_bandwidth, double t_c);
// Time of one PS exchange step for G senders over N_ps servers (the slower of
// the servers' aggregate link and the sender's link):
//   t = max(2·G·P / (N_ps·B_ps), 2·P / B_worker)
double ps_exchange_time(int senders, int num_ps, double param_bytes, double ps_bandwidth, double worker_bandwidth);
// Ring allreduce of P bytes over G ranks at bandwidth B: 2(G−1)/G · P / B.
double ring_allreduce_time(int g, double param_bytes, double bandwidth);
// BytePS's closed form (Jiang et al., OSDI 2020, §3.1) for n workers with k
// CPU servers mixing allreduce and PS: t = 2n(n−1)M / ((n² + kn − 2k)·B).
double byteps_time(int n, int k, double message_bytes, double bandwidth);

// The authors' minibatch procedure: candidates are the minibatch sizes whose
// memory fits (fixed bytes + per-sample bytes · X ≤ budget); among them take
// the SMALLEST whose measured throughput (images/s) is within `tolerance`
// (e.g. 0.05) of the best — the knee. Returns the index into `candidates`, or
// −1 when none fits.
struct MinibatchCandidate {
  int minibatch = 0;
  double memory_bytes = 0;   // parameters + gradients + optimizer state + activations + workspace
  double images_per_s = 0;   // measured
};
int choose_minibatch(const std::vector<MinibatchCandidate>& candidates, double memory_budget_bytes,
                     double tolerance = 0.05);

// Linear scaling rule with warm-up (Goyal et al. 2017): lr = base_lr ·
// global_batch / base_batch, reached after `warmup` epochs (5 in the paper
// for large batches; 0 when global_batch ≤ base_batch).
struct ScaledLr {
  double lr = 0;
  double warmup_epochs = 0;
};
ScaledLr scale_lr(double base_lr, int base_batch, int global_batch, double warmup_epochs = 5.0);

// ---- Step time of a concrete run (ours, beyond the paper; docs/performance-model.md)
// A link: bandwidth in bytes/second and a per-message latency in seconds
// (from a ping-pong: latency = one-way time of 8 B, bandwidth = S / (t(S) − latency)).
struct Link {
  double bandwidth = 1.25e9;
  double latency = 0;
};
struct Links {
  Link intra;  // between ranks of one node (shared memory, NVLink/PCIe)
  Link inter;  // between nodes (the network; also PS ⇄ worker links)
};

// The configuration of a run as the model sees it.
struct RunShape {
  comm::Mode mode = comm::Mode::allreduce;
  int workers = 1;         // G
  int servers = 0;         // N_ps
  int ranks_per_node = 0;  // K (0: all workers on one node)
  int threads = 1;         // compute threads per worker rank
  double param_bytes = 0;  // P
  bool sleeping_waits = false;  // waits sleep between polls (comm/wait.hpp WaitPolicy::sleep)
  double overlap = 0;      // fraction of T_C during which the exchange may run: buckets and
                           // slices leave as backward makes them ready (0: none credited)
  double bucket_bytes = double(1 << 20);  // the last bucket, exchanged after T_C (the default
                                          // --bucket-mb; tune and report do not pass the job's)
  int nodes() const;       // ⌈G / K⌉ (1 when K = 0)
};

// The machine the run shares: hardware threads and the runnable threads of
// other jobs (1-min load average minus the run's own ranks).
struct MachineLoad {
  double cores = 1;
  double background = 0;
  double sched_latency = 0.012;  // Linux CFS period for ≤ 8 runnable: 6 ms · (1 + log2 cores), here 2 cores
  double min_granularity = 0.0015;  // CFS minimum slice: 0.75 ms · (1 + log2 cores)
  double poll_period = 200e-6;  // seconds between two polls of a long sleeping wait (comm/wait.hpp
                                // kSleepMaxS plus the timer's slack; measured by dtrain tune)
  double poll_fraction = 0;     // φ: fraction of a core one thread in a long sleeping wait uses
                                // (the polls and the timer wake-ups; measured by dtrain tune)
  double time_share = 1;       // η: CPU seconds of a compute step when more threads than cores
                               // share them, over its time alone (context switches, caches
                               // refilled after every slice); measured by dtrain tune
};

// CPU contention factor κ: runnable compute threads over cores, at least 1
// (time-slicing: every thread gets cores/runnable of a core).
double cpu_contention(double runnable_threads, double cores);

// Synchronisation hops on a step's critical path (a rank waits for a message
// from another): allreduce ⌈log2 G⌉ (recursive doubling of small messages),
// ps 2 (push, pull), hybrid 2 + 2·⌈log2 K⌉ (node reduce, push, pull, node bcast).
int sync_hops(const RunShape& r);
// Expected wait for a descheduled rank to run again when ρ = runnable / cores > 1
// (CFS time slicing, ours): slice = max(min_granularity, latency / ρ), and the
// woken rank waits on average (ρ − 1)/ρ of a slice; 0 when ρ ≤ 1.
double wakeup_wait(double rho, const MachineLoad& m);
// Per hop, the time between a message's arrival and the moment its receiver
// notices it: spinning waits notice at once, or after wakeup_wait(ρ) when the
// spinner must first be scheduled again; a sleeping wait that outlasted its
// spin phase polls every poll_period (its sleeps double up to that within
// ~1 ms), so it notices on average poll_period/2 later (a sleeper that wakes
// preempts the running thread: CFS credits it half a latency period).
double hop_wait(bool sleeping_waits, double rho, const MachineLoad& m);

// Busy time of one step's gradient exchange (seconds), per mode:
//   allreduce  ring over G ranks: 2(G−1)/G·P/B + 2(G−1)·λ  (B, λ: inter when
//              the workers span nodes, else intra)
//   ps         max(2·G·P/(N_ps·B), 2·P/B) + 2·λ·G/N_ps·(servers serve the
//              G senders one after another) — the paper's PS term
//   hybrid     intra-node reduce + broadcast 2(K−1)/K·P/B_intra + 2·λ_intra·(K−1)
//              plus the PS term with the n node leaders as senders
double exchange_time(const RunShape& r, const Links& l);

// Share of a step's compute that is backward: backward ≈ 2× forward (every
// layer computes dx and dW), so 2/3. The compute stand-in's schedule, and the
// window in which the exchange overlaps compute on a cluster (predict_run).
inline constexpr double kBackwardShare = 2.0 / 3.0;

// The exchange's exposed part (seconds) when its overlappable part may run
// during the last `overlap`·T_C of the compute (backward, whose buckets and
// slices leave as they are ready), ours: the overlap of wait-free
// backpropagation (Zhang et al., "Poseidon", USENIX ATC 2017), with the
// exchange link-bound and the bytes ready no later than uniformly over
// backward:
//   v = t_comm (allreduce: every bucket's ring runs as soon as it is ready),
//       t_comm / 2 (ps, hybrid: the pushes and node reductions; the pulls and
//       node broadcasts wait for the servers' joint check of the whole
//       gradient, comm/ps_client.cpp, so they follow backward; since the ps
//       servers speculate — ps mode without clipping, comm::ServeHooks — ps
//       pulls may start during backward too: not credited, the term was
//       fitted before that change, docs/performance-model.md §2)
//   exposed = (t_comm − v) + max(v − overlap·t_c, v·min(1, b/P))
// where v·b/P is the last bucket, which leaves only when backward ends.
// overlap = 0: t_comm.
double exposed_exchange(double t_comm, double t_c, const RunShape& r);

// Predicted times of one step (seconds), see predict_step.
struct StepPrediction {
  double contention = 1;  // κ
  double t_c = 0;         // κ · T_C1
  double t_comm = 0;      // exchange busy time, κ-scaled when ranks outnumber cores
  double t_o = 0;         // exposed overhead (the paper's T_O)
  double t_step = 0;      // T_C + T_O
  double r_o() const { return t_c > 0 ? t_o / t_c : 0; }
};
// t_c1: T_C of one worker alone on an idle machine at this minibatch and thread count.
//   ρ = (G·threads + background) / cores,  κ = max(1, ρ)      CPU contention
//   T_C = compute_phase(samples, G, threads, m, waiting_threads(r))  (= κ·T_C1 for one sample)
//   T_O = exposed_exchange(exchange_time·κ, T_C, r) + sync_hops · hop_wait(sleeping, ρ)
//   step = T_C + T_O
StepPrediction predict_step(double t_c1, const RunShape& r, const Links& l, const MachineLoad& m);
// The same with T_C1 given as per-process samples (seconds, ≥ 1; one per
// profiled process: on shared machines a process's speed varies from one
// process to the next while staying steady within it — see compute_phase).
StepPrediction predict_step(const std::vector<double>& t_c1_samples, const RunShape& r, const Links& l,
                            const MachineLoad& m);

// The compute phase of a synchronous step (seconds): every worker i computes
// for t_i (its process's T_C1) and the step waits for the last one (stragglers,
// cf. Chen et al. 2016, "Revisiting distributed synchronous SGD"); when the
// workers' threads outnumber the cores they share them, so the phase also
// lasts at least the total work over the capacity left to the job:
//   phase(t_1..t_G) = max( max_i t_i ,  η·Σ_i threads·t_i / capacity )
//   η = m.time_share when ρ > 1, else 1
//   capacity = cores·G·thr/(G·thr + bg)  when ρ > 1 (fair share with the
//              background's bg runnable threads), else cores − bg,
//              less waiting·φ: the cores taken by the `waiting` threads that
//              poll in sleeping waits meanwhile (servers, communication threads)
// With the t_i unknown per process, the prediction is the expectation of
// phase over G independent draws from the samples: exact over all
// n^G tuples when n^G ≤ 4096, else the mean over 4096 tuples from a
// counter-based pseudo-random generator (deterministic; a tuple's first G
// draws do not depend on G, so the rows G = 1, 2, … of a table extend one
// another's draws: O(4096·G) for the whole table). A single sample t gives
// max(t, η·G·thr·t/capacity) = η·κ·t when ρ > 1.
double compute_phase(const std::vector<double>& t_c1_samples, int workers, int threads, const MachineLoad& m,
                     double waiting = 0);
// Threads that poll in sleeping waits during a step: every server and every
// worker's communication thread (0 for one worker alone, or spinning waits).
int waiting_threads(const RunShape& r);

}  // namespace dtrain::engine::perf
