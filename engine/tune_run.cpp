// engine/tune_run.cpp — the body of `dtrain tune`: profile, choose, predict, write.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "comm/wait.hpp"
#include "core/error.hpp"
#include "engine/tune.hpp"
#include "engine/tune_profile.hpp"
#include "io/hdf5_dataset.hpp"

namespace dtrain::engine {

namespace {
constexpr int kMaxProfileRanks = 8;  // T_C samples: one per rank, up to this many

// A barrier whose waiting ranks sleep instead of spinning on a core (they
// would otherwise slow the rank that is measuring).
void sleeping_barrier(MPI_Comm world) {
  MPI_Request req;
  DT_CHECK_MPI(MPI_Ibarrier(world, &req));
  for (int done = 0; !done;) {
    DT_CHECK_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (!done) usleep(1000);
  }
}

// World rank of the first rank outside rank 0's (virtual) node, or −1.
int other_node_rank(MPI_Comm world, int ranks_per_node) {
  int rank = 0, size = 1;
  DT_CHECK_MPI(MPI_Comm_rank(world, &rank));
  DT_CHECK_MPI(MPI_Comm_size(world, &size));
  if (ranks_per_node > 0) return ranks_per_node < size ? ranks_per_node : -1;
  MPI_Comm shared;
  DT_CHECK_MPI(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared));
  int leader = rank;
  DT_CHECK_MPI(MPI_Allreduce(&rank, &leader, 1, MPI_INT, MPI_MIN, shared));
  MPI_Comm_free(&shared);
  std::vector<int> leaders(static_cast<size_t>(size));
  DT_CHECK_MPI(MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, world));
  for (int r = 0; r < size; ++r)
    if (leaders[static_cast<size_t>(r)] != leaders[0]) return r;
  return -1;
}
}  // namespace

std::vector<ClusterRow> predict_cluster(double t_c, double p, const perf::Links& l, int nodes, int gpn) {
  DT_CHECK(t_c > 0 && nodes >= 1 && gpn >= 1, "predict_cluster: bad arguments");
  std::vector<ClusterRow> rows;
  auto t_o = [&](int mode, int g, int servers) {
    perf::RunShape s;
    s.mode = mode;
    s.workers = g;
    s.servers = servers;
    s.ranks_per_node = gpn;
    s.param_bytes = p;
    return g == 1 ? 0.0 : std::max(0.0, perf::exchange_time(s, l) - t_c);  // one GPU exchanges nothing
  };
  for (int g = 1; g <= nodes * gpn; ++g) {
    ClusterRow r;
    r.g = g;
    r.nodes = (g + gpn - 1) / gpn;
    r.sender_ok = perf::sender_link_ok(p, l.inter.bandwidth, t_c);
    // When the sender's own link cannot carry 2·P within T_C, servers beyond one per sender do not help.
    r.ps_servers = perf::ps_count(g, p, l.inter.bandwidth, t_c);
    r.hybrid_servers = perf::ps_count(r.nodes, p, l.inter.bandwidth, t_c);
    if (!r.sender_ok) {
      r.ps_servers = std::min(r.ps_servers, g);
      r.hybrid_servers = std::min(r.hybrid_servers, r.nodes);
    }
    r.ps_t_o = t_o(1, g, r.ps_servers);
    r.hybrid_t_o = t_o(2, g, r.hybrid_servers);
    r.allreduce_t_o = t_o(0, g, 0);
    r.byteps_t = g >= 2 ? perf::byteps_time(g, r.ps_servers, p, l.inter.bandwidth) : 0.0;
    r.ps_alpha = t_c / (t_c + r.ps_t_o);
    r.hybrid_alpha = t_c / (t_c + r.hybrid_t_o);
    r.allreduce_alpha = t_c / (t_c + r.allreduce_t_o);
    rows.push_back(r);
  }
  return rows;
}

int run_tune(const TuneOptions& t, TrainConfig cfg, MPI_Comm world) {
  int rank = 0, size = 1;
  DT_CHECK_MPI(MPI_Comm_rank(world, &rank));
  DT_CHECK_MPI(MPI_Comm_size(world, &size));
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  Profile prof;
  prof.model = cfg.model;
  prof.cores = cores;
  // Compute threads per worker: the job's, else what the trainer's default gives a
  // node of this kind running gpus_per_node workers (its cores shared among them).
  prof.threads = cfg.threads > 0 ? cfg.threads : std::max(1, static_cast<int>(cores) / t.gpus_per_node);
  prof.load_before = load_average_1m();
  int classes = 0;
  if (!cfg.train_data.empty()) classes = io::Hdf5Dataset(cfg.train_data).classes();
  measure_memory(cfg.model, classes, prof);
  // Memory budget per worker (rank 0's figure for every rank, so that all skip
  // the same candidates), and the candidates that fit it: only those are profiled.
  double budget = 0;
  if (rank == 0) {
    const double ram = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
    budget = t.memory_gb > 0 ? t.memory_gb * 1e9 : ram / t.gpus_per_node;
  }
  DT_CHECK_MPI(MPI_Bcast(&budget, 1, MPI_DOUBLE, 0, world));
  std::vector<bool> fits(t.candidates.size());
  for (size_t i = 0; i < t.candidates.size(); ++i)
    fits[i] = prof.fixed_bytes + prof.per_sample_bytes * t.candidates[i] <= budget;
  if (std::find(fits.begin(), fits.end(), true) == fits.end())
    DT_USAGE("dtrain tune: no minibatch in option 'candidates' fits ", budget / 1e9, " GB per worker (",
             prof.fixed_bytes / 1e6, " MB + ", prof.per_sample_bytes / 1e6,
             " MB per image; option 'device-memory-gb' sets the budget)");
  // The outputs must be writable before minutes of profiling.
  if (rank == 0)
    for (const std::string& path : {t.out, t.out + ".profile.json"}) {
      const bool existed = std::filesystem::exists(path);
      if (existed && !std::filesystem::is_regular_file(path))
        DT_USAGE("dtrain tune: option 'out': '", path, "' exists and is not a file");
      std::ofstream probe(path, std::ios::app);
      if (!probe) DT_USAGE("dtrain tune: option 'out': cannot write '", path, "'");
      probe.close();
      if (!existed) std::filesystem::remove(path);
    }

  // Links: ping-pong under mpirun (every rank takes part), else the given figures.
  const double gbps = t.link_gbps > 0 ? t.link_gbps : 10.0;
  const double lat = t.latency_us >= 0 ? t.latency_us * 1e-6 : 5e-6;
  prof.links.inter = {gbps * 1e9 / 8, lat};
  prof.links.intra = {(t.intra_gbps > 0 ? t.intra_gbps : gbps) * 1e9 / 8, lat};
  prof.links_source = "given";
  if (size >= 2) {
    const size_t bytes = static_cast<size_t>(std::clamp(prof.param_bytes, 1048576.0, 268435456.0));
    perf::Link intra = measure_link(world, 0, 1, bytes);
    int other = other_node_rank(world, cfg.ranks_per_node);
    perf::Link inter = other > 0 ? measure_link(world, 0, other, bytes) : intra;
    if (t.intra_gbps <= 0) prof.links.intra = intra;
    if (t.link_gbps <= 0) prof.links.inter = inter;
    if (t.latency_us >= 0) prof.links.intra.latency = prof.links.inter.latency = lat;
    else if (t.link_gbps > 0) prof.links.inter.latency = inter.latency;
    prof.links_source = "ping-pong, " + std::to_string(size) + " ranks" +
                        (other > 0 ? ", nodes 0 and " + std::to_string(other) : ", one node");
  }
  // The cost of a sleeping wait (comm/wait.hpp), on rank 0 while the others sleep.
  if (rank == 0) prof.poll_fraction = comm::measure_poll_cost(400, &prof.poll_period);
  sleeping_barrier(world);
  // T_C: every rank (at most kMaxProfileRanks) measures in turn while the others sleep.
  const int profilers = std::min(size, kMaxProfileRanks);
  const size_t n_steps = static_cast<size_t>(t.profile_steps);
  std::vector<std::vector<double>> process_t_c(t.candidates.size()), steps(t.candidates.size()),
      backgrounds(t.candidates.size());
  std::vector<double> time_share(t.candidates.size(), 1.0), workspaces(t.candidates.size(), 0.0);
  if (t.t_c_ms <= 0)
    for (size_t i = 0; i < t.candidates.size(); ++i) {
      if (!fits[i]) continue;  // the same on every rank: budget was broadcast
      const int x = t.candidates[i];
      std::vector<double> mine(3 + n_steps, 0.0);  // T_C, background, workspace bytes, every step's time
      for (int r = 0; r < profilers; ++r) {
        if (rank == r) {  // measured, then corrected for the other jobs that shared the cores meanwhile
          const double w0 = MPI_Wtime(), b0 = machine_busy_seconds(), c0 = self_cpu_seconds();
          std::vector<double> each;
          const double raw = measure_step_time(cfg, x, t.profile_steps, prof.threads, &each, nullptr, &mine[2]);
          const double wall = MPI_Wtime() - w0, busy = machine_busy_seconds() - b0, own = self_cpu_seconds() - c0;
          mine[1] = b0 > 0 && wall > 0.2 ? std::max(0.0, (busy - own) / wall) : 0.0;
          const double kappa = perf::cpu_contention(prof.threads + mine[1], cores);
          mine[0] = raw / kappa;
          for (size_t k = 0; k < n_steps && k < each.size(); ++k) mine[3 + k] = each[k] / kappa;
        }
        sleeping_barrier(world);
      }
      std::vector<double> all(mine.size() * static_cast<size_t>(size));
      DT_CHECK_MPI(MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
                              static_cast<int>(mine.size()), MPI_DOUBLE, 0, world));
      std::vector<double> pooled;
      for (int r = 0; r < profilers; ++r) {
        const double* m = all.data() + mine.size() * static_cast<size_t>(r);
        process_t_c[i].push_back(m[0]);
        backgrounds[i].push_back(m[1]);
        workspaces[i] = std::max(workspaces[i], m[2]);
        pooled.insert(pooled.end(), m + 3, m + 3 + n_steps);
      }
      // Time sharing: every profiling rank at once, when their threads exceed the cores.
      if (profilers * prof.threads > cores && cfg.device != "cuda") {
        double cpu_step = 0;
        if (rank < profilers) {
          measure_step_time(cfg, x, t.profile_steps, prof.threads, nullptr, &cpu_step);
        }
        std::vector<double> cpu(static_cast<size_t>(size));
        DT_CHECK_MPI(MPI_Gather(&cpu_step, 1, MPI_DOUBLE, cpu.data(), 1, MPI_DOUBLE, 0, world));
        if (rank == 0) {
          double num = 0, den = 0;
          for (int r = 0; r < profilers; ++r) {
            num += cpu[static_cast<size_t>(r)];
            den += prof.threads * process_t_c[i][static_cast<size_t>(r)];
          }
          time_share[i] = std::max(1.0, num / den);
        }
        sleeping_barrier(world);
      }
      // At most kMaxSamples, evenly spaced over the processes and steps.
      const size_t keep = std::min(pooled.size(), kMaxSamples);
      for (size_t k = 0; k < keep; ++k) steps[i].push_back(pooled[k * pooled.size() / keep]);
    }
  if (rank != 0) {
    sleeping_barrier(world);
    return kExitOk;
  }
  std::printf("dtrain tune: model %s, P = %.3f MB, memory %.2f MB fixed + %.3f MB per image (budget %.2f GB), %d thread(s), load %.2f\n",
              cfg.model.c_str(), prof.param_bytes / 1e6, prof.fixed_bytes / 1e6, prof.per_sample_bytes / 1e6,
              budget / 1e9, prof.threads, prof.load_before);
  std::printf("links (%s): intra %.3f GB/s %.1f µs, inter %.3f GB/s %.1f µs\n", prof.links_source.c_str(),
              prof.links.intra.bandwidth / 1e9, prof.links.intra.latency * 1e6, prof.links.inter.bandwidth / 1e9,
              prof.links.inter.latency * 1e6);
  std::printf("sleeping wait: a poll every %.0f µs, %.1f%% of a core per waiting thread\n", 1e6 * prof.poll_period,
              100 * prof.poll_fraction);
  std::printf("%10s %10s %10s %12s %6s\n", "X_mini", "T_C ms", "images/s", "memory MB", "bg");
  std::vector<perf::MinibatchCandidate> cands;
  for (size_t i = 0; i < t.candidates.size(); ++i) {
    const int x = t.candidates[i];
    ComputePoint q;
    q.minibatch = x;
    q.memory_bytes = prof.fixed_bytes + prof.per_sample_bytes * x;
    if (!fits[i]) {
      std::printf("%10d %10s %10s %12.1f %6s  (does not fit: not profiled)\n", x, "-", "-", q.memory_bytes / 1e6, "-");
      continue;
    }
    if (t.t_c_ms > 0) {  // what-if: T_C given at the job's minibatch, proportional to X
      q.t_c = t.t_c_ms * 1e-3 * x / cfg.minibatch;
    } else {
      q.samples = steps[i];
      q.process_t_c = process_t_c[i];
      q.time_share = time_share[i];
      q.memory_bytes += workspaces[i];  // cuDNN's chosen convolution workspace (0 on the CPU)
      std::vector<double> s = process_t_c[i];
      std::sort(s.begin(), s.end());
      q.t_c = s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
      for (double b : backgrounds[i]) q.background += b / static_cast<double>(backgrounds[i].size());
    }
    q.images_per_s = x / q.t_c;
    prof.points.push_back(q);
    cands.push_back({x, q.memory_bytes, q.images_per_s});
    std::string spread;
    if (q.time_share != 1.0) {
      char b[64];
      std::snprintf(b, sizeof b, "  time-shared η %.3f", q.time_share);
      spread = b;
    }
    if (q.process_t_c.size() > 1) {
      spread += "  per process:";
      for (double v : q.process_t_c) {
        char b[32];
        std::snprintf(b, sizeof b, " %.2f", 1e3 * v);
        spread += b;
      }
    }
    std::printf("%10d %10.2f %10.0f %12.1f %6.2f%s%s\n", x, 1e3 * q.t_c, q.images_per_s, q.memory_bytes / 1e6,
                q.background, q.memory_bytes > budget ? "  (does not fit)" : "", spread.c_str());
  }
  int pick = perf::choose_minibatch(cands, budget, t.knee);
  if (pick < 0) DT_USAGE("dtrain tune: no candidate minibatch fits ", budget / 1e9, " GB (option 'device-memory-gb')");
  const ComputePoint& best = prof.points[static_cast<size_t>(pick)];
  std::printf("chosen minibatch %d (the smallest within %.0f%% of the best images/s that fits)\n", best.minibatch,
              100 * t.knee);

  auto rows = predict_cluster(best.t_c, prof.param_bytes, prof.links, t.nodes, t.gpus_per_node);
  std::printf("%4s %5s | %4s %9s %6s %6s | %4s %9s %6s %6s | %9s %6s | %9s\n", "G", "nodes", "Nps", "ps T_O ms", "α",
              "S", "Nps", "hy T_O ms", "α", "S", "ar T_O ms", "S", "BytePS ms");
  for (const auto& r : rows)
    std::printf("%4d %5d | %4d %9.2f %6.3f %6.2f | %4d %9.2f %6.3f %6.2f | %9.2f %6.2f | %9.2f\n", r.g, r.nodes,
                r.ps_servers, 1e3 * r.ps_t_o, r.ps_alpha, r.g * r.ps_alpha, r.hybrid_servers, 1e3 * r.hybrid_t_o,
                r.hybrid_alpha, r.g * r.hybrid_alpha, 1e3 * r.allreduce_t_o, r.g * r.allreduce_alpha, 1e3 * r.byteps_t);
  // The seed formula with one PS and no overlap: R_O = 2·P / (B·T_C) per worker.
  const double r_o = 2 * prof.param_bytes / (prof.links.inter.bandwidth * best.t_c);
  std::printf("one PS, no overlap: R_O = %.4f, S saturates at %.1f, largest G with α ≥ %.2f: %d%s\n", r_o,
              perf::speedup_limit(r_o), t.target_efficiency, perf::max_workers(r_o, t.target_efficiency),
              rows.back().sender_ok ? "" : "; the sender link cannot carry 2·P within T_C");

  // The tuned job: the mode with the best predicted speedup at G = n·g.
  const ClusterRow& last = rows.back();
  const int g = last.g;
  TrainConfig tuned = cfg;
  tuned.minibatch = best.minibatch;
  tuned.threads = cfg.threads;  // 0 stays 0: the trainer divides the cores among the ranks it finds
  // The tuned job must not append to or overwrite the untuned job's outputs.
  if (!cfg.metrics.empty()) tuned.metrics = t.out + ".metrics.jsonl";
  if (!cfg.save_params.empty()) tuned.save_params = t.out + ".params.h5";
  if (g == 1) {
    tuned.mode = "allreduce";
    tuned.ps = 0;
    tuned.ranks_per_node = 0;
  } else if (t.nodes > 1 && t.gpus_per_node > 1 && last.hybrid_alpha >= last.ps_alpha) {
    tuned.mode = "hybrid";
    tuned.ps = last.hybrid_servers;
    tuned.ranks_per_node = t.gpus_per_node;
  } else {
    tuned.mode = "ps";
    tuned.ps = last.ps_servers;
    tuned.ranks_per_node = t.nodes > 1 ? t.gpus_per_node : 0;
  }
  const int base = t.base_batch > 0 ? t.base_batch : cfg.minibatch;
  perf::ScaledLr lr = perf::scale_lr(cfg.lr, base, best.minibatch * g, std::min(5.0, 0.1 * cfg.epochs));
  // The linear rule holds up to a point (Goyal et al.: ResNet-50 to 8k); past it
  // training diverges, so the factor is capped (--max-lr-scale, default 4).
  // LeNet-5 on Fashion-MNIST, global batch 1024 (4 × 256), 3 epochs: lr 0.2
  // (×4 of 0.05 @ 64) reaches 77.7 %, lr 0.4 (×8) and 0.8 (×16) stay at chance.
  const bool capped = lr.lr > cfg.lr * t.max_lr_scale;
  if (capped) {
    lr.lr = cfg.lr * t.max_lr_scale;
    std::printf("lr: the linear rule's factor %.1f is capped at %.1f (option 'max-lr-scale')\n",
                static_cast<double>(best.minibatch) * g / base, t.max_lr_scale);
  }
  tuned.lr = static_cast<float>(lr.lr);
  tuned.warmup_epochs = static_cast<float>(std::max<double>(cfg.warmup_epochs, lr.warmup_epochs));
  tuned.loader_depth = std::max(2, cfg.loader_depth);
  std::ofstream f(t.out);
  if (!f) DT_USAGE("dtrain tune: option 'out': cannot write '", t.out, "'");
  f << "# Tuned by dtrain tune for " << t.nodes << " node(s) × " << t.gpus_per_node << " worker(s) from "
    << (cfg.job.empty() ? std::string("the command line") : cfg.job) << ".\n# Run: "
    << (g + tuned.ps > 1 ? "mpirun -np " + std::to_string(g + tuned.ps) + " " : std::string())
    << "dtrain train --job " << t.out << "\n# lr " << cfg.lr << " for global batch " << base << " scaled to "
    << best.minibatch * g << " (Goyal et al. 2017" << (capped ? ", capped by max-lr-scale" : "")
    << "); profile: " << t.out << ".profile.json\n"
    << job_file_text(tuned);
  std::ofstream pf(t.out + ".profile.json");
  pf << prof.to_json().dump(1) << "\n";
  std::printf("wrote %s (mode %s, ps %d, minibatch %d, lr %.4g, warm-up %.2f epochs) and %s.profile.json\n",
              t.out.c_str(), tuned.mode.c_str(), tuned.ps, tuned.minibatch, tuned.lr, tuned.warmup_epochs,
              t.out.c_str());
  sleeping_barrier(world);
  return kExitOk;
}

}  // namespace dtrain::engine
