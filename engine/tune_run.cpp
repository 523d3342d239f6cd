// engine/tune_run.cpp — the body of `dtrain tune`: profile, choose, predict
// (engine/predict.hpp: the cluster asked for and this machine), write.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>

#include "comm/discovery.hpp"
#include "comm/wait.hpp"
#include "core/error.hpp"
#include "core/format.hpp"
#include "engine/predict.hpp"
#include "engine/tune.hpp"
#include "engine/report.hpp"  // median
#include "engine/run_folder.hpp"
#include "engine/exit.hpp"
#include "engine/train_job.hpp"  // open_job_dataset, make_job_net, check_fits, check_normalization
#include "engine/tune_profile.hpp"
#include "io/dataset.hpp"
#include "io/synced_file.hpp"

namespace dtrain::engine {

namespace {

// This dtrain's absolute path (/proc/self/exe), for the tuned job file's Run
// line: a bare `dtrain` failed where dtrain is not on PATH (build/dtrain).
std::string this_program() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec || p.empty() ? std::string("dtrain") : p.string();
}

// `w` as one word a shell reads back as it is: bare when it holds only
// characters no shell treats specially, else in single quotes.
std::string shell_word(const std::string& w) {
  const bool bare = !w.empty() && std::all_of(w.begin(), w.end(), [](unsigned char c) {
    return std::isalnum(c) || std::strchr("/._-+=:,@%", c) != nullptr;
  });
  if (bare) return w;
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}
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

// Memory budget per worker (rank 0's figure for every rank, so that all skip
// the same candidates).
double memory_budget(const TuneOptions& t, int rank, MPI_Comm world) {
  double budget = 0;
  if (rank == 0) {
    const double ram = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
    budget = t.memory_gb > 0 ? t.memory_gb * 1e9 : ram / t.workers_per_node;
  }
  DT_CHECK_MPI(MPI_Bcast(&budget, 1, MPI_DOUBLE, 0, world));
  return budget;
}

// The outputs must be writable before minutes of profiling (rank 0 writes them).
void check_tune_outputs(const TuneOptions& t) {
  // The longest name written: OUT.profile.json.tmp.<pid> (25 bytes more than OUT).
  check_new_output("dtrain tune: ", "out", t.out, t.overwrite, "choose another --out", 13 + kTemporarySuffixBytes);
  check_new_output("dtrain tune: ", "out", t.out + ".profile.json", t.overwrite, "choose another --out", 0);
}

// Links: ping-pong under mpirun (every rank takes part), else the given figures.
void measure_links(const TuneOptions& t, const TrainConfig& cfg, MPI_Comm world, int size, Profile& prof) {
  const double gbps = t.link_gbps > 0 ? t.link_gbps : 10.0;
  const double lat = t.latency_us >= 0 ? t.latency_us * 1e-6 : 5e-6;
  prof.links.inter = {gbps * 1e9 / 8, lat};
  prof.links.intra = {(t.intra_gbps > 0 ? t.intra_gbps : gbps) * 1e9 / 8, lat};
  prof.links_source = "given";
  if (size < 2) return;
  const size_t bytes = static_cast<size_t>(std::clamp(prof.param_bytes, 1048576.0, 268435456.0));
  perf::Link intra = measure_link(world, 0, 1, bytes);
  int other = comm::other_node_rank(world, cfg.ranks_per_node);
  perf::Link inter = other > 0 ? measure_link(world, 0, other, bytes) : intra;
  if (t.intra_gbps <= 0) prof.links.intra = intra;
  if (t.link_gbps <= 0) prof.links.inter = inter;
  if (t.latency_us >= 0) prof.links.intra.latency = prof.links.inter.latency = lat;
  else if (t.link_gbps > 0) prof.links.inter.latency = inter.latency;
  prof.links_source = "ping-pong, " + std::to_string(size) + " ranks" +
                      (other > 0 ? ", nodes 0 and " + std::to_string(other) : ", one node");
}

// What profiling found for one candidate minibatch (rank 0's view, gathered).
struct CandidateProfile {
  std::vector<double> process_t_c;  // T_C per profiling rank, corrected for background load
  std::vector<double> steps;        // step-time samples, at most kMaxSamples
  std::vector<double> backgrounds;  // cores other jobs used, per profiling rank
  double time_share = 1.0;          // η (profilers' threads exceed the cores)
  double workspace = 0.0;           // bytes of convolution workspace (cuDNN)
};

// T_C of minibatch x: every rank (at most kMaxProfileRanks) measures in turn
// while the others sleep; collective over `world`.
CandidateProfile profile_candidate(const TuneOptions& t, const TrainConfig& cfg, const Profile& prof, int x,
                                   int rank, int size, MPI_Comm world) {
  const int profilers = std::min(size, kMaxProfileRanks);
  const size_t n_steps = static_cast<size_t>(t.profile_steps);
  const double cores = prof.cores;
  CandidateProfile c;
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
    c.process_t_c.push_back(m[0]);
    c.backgrounds.push_back(m[1]);
    c.workspace = std::max(c.workspace, m[2]);
    pooled.insert(pooled.end(), m + 3, m + 3 + n_steps);
  }
  // Time sharing: every profiling rank at once, when their threads exceed the cores.
  if (profilers * prof.threads > cores && cfg.device != Device::cuda) {
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
        den += prof.threads * c.process_t_c[static_cast<size_t>(r)];
      }
      c.time_share = std::max(1.0, num / den);
    }
    sleeping_barrier(world);
  }
  // At most kMaxSamples, evenly spaced over the processes and steps.
  const size_t keep = std::min(pooled.size(), kMaxSamples);
  for (size_t k = 0; k < keep; ++k) c.steps.push_back(pooled[k * pooled.size() / keep]);
  return c;
}

// Rank 0: the profile's header lines and one line per candidate; fills
// prof.points; returns the chosen point (the knee among those that fit).
const ComputePoint& print_candidates(const TuneOptions& t, const TrainConfig& cfg, double budget,
                                     const std::vector<bool>& fits, const std::vector<CandidateProfile>& measured,
                                     Profile& prof) {
  std::printf("dtrain tune: model %s, P = %.3f MB, memory %.2f MB fixed + %.3f MB per image (budget %.2f GB), %d thread(s), load %.2f\n",
              cfg.model.c_str(), prof.param_bytes / 1e6, prof.fixed_bytes / 1e6, prof.per_sample_bytes / 1e6,
              budget / 1e9, prof.threads, prof.load_before);
  std::printf("links (%s): intra %.3f GB/s %.1f µs, inter %.3f GB/s %.1f µs\n", prof.links_source.c_str(),
              prof.links.intra.bandwidth / 1e9, prof.links.intra.latency * 1e6, prof.links.inter.bandwidth / 1e9,
              prof.links.inter.latency * 1e6);
  std::printf("sleeping wait: a poll every %.0f µs, %.1f%% of a core per waiting thread\n", 1e6 * prof.poll_period,
              100 * prof.poll_fraction);
  if (prof.update_s > 0)
    std::printf("local update T_U %.2f ms (%s; added to T_C where workers update: allreduce)\n", 1e3 * prof.update_s,
                t.t_u_ms < 0 ? "measured here" : "given");
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
      const CandidateProfile& m = measured[i];
      q.samples = m.steps;
      q.process_t_c = m.process_t_c;
      q.time_share = m.time_share;
      q.memory_bytes += m.workspace;  // cuDNN's chosen convolution workspace (0 on the CPU)
      q.t_c = median(m.process_t_c);
      for (double b : m.backgrounds) q.background += b / static_cast<double>(m.backgrounds.size());
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
  return best;
}

// The two tables (engine/predict.hpp: one prediction code, two placements):
// the cluster asked for, and this machine with its time-sharing terms
// (meaningful when T_C was measured here on its CPU cores: `here`).
struct TuneTables {
  PredictionTable cluster, machine;
  bool here = false;
};

TuneTables print_tables(const TuneOptions& t, const TrainConfig& cfg, const Profile& prof, const ComputePoint& best) {
  const int x = best.minibatch;
  const std::string worker = cfg.device == Device::cuda ? std::string("GPU")
                             : t.t_c_ms > 0             ? std::string("device (T_C given: --t-c-ms)")
                                                        : std::to_string(prof.threads) + " CPU core(s)";
  TuneTables tables;
  tables.cluster = prediction_table(prof, x, t.nodes, t.workers_per_node, Placement::on_cluster());
  const PredictionTable& cluster = tables.cluster;
  std::printf("\n%s", table_text(cluster, prof, worker).c_str());
  std::printf("  BytePS ms: its closed form (Jiang et al. 2020) with k = the ps column's N_ps, for comparison only.\n");
  std::string largest;
  for (comm::Mode mode : {comm::Mode::ps, comm::Mode::hybrid, comm::Mode::allreduce}) {
    const int g_max = largest_workers(prof, x, t.workers_per_node, mode, t.target_efficiency, Placement::on_cluster());
    largest += std::string(largest.empty() ? "" : ", ") + comm::mode_name(mode) + " " +
               (g_max >= 65536 ? std::string("≥ 65536") : std::to_string(g_max));
  }
  std::printf("  largest G with α ≥ %s on such a cluster (%d per node): %s%s\n",
              format::shortest(t.target_efficiency).c_str(), t.workers_per_node, largest.c_str(),
              cluster.rows.back().sender_ok ? "" : "; the sender link cannot carry 2·P within T_C");
  tables.here = t.t_c_ms <= 0 && cfg.device != Device::cuda;
  if (tables.here) {
    tables.machine = prediction_table(prof, x, t.nodes, t.workers_per_node,
                                      Placement::on_machine(prof.cores, best.background));
    std::printf("\n%s", table_text(tables.machine, prof, worker).c_str());
  } else {
    std::printf("\nno table for this machine: %s\n",
                t.t_c_ms > 0 ? "T_C was given (--t-c-ms), not measured here"
                             : "its time-sharing terms model CPU cores, and the GPU ranks here share one GPU");
  }
  return tables;
}

// The mode of TuneOptions::modes with the best predicted speedup at the
// cluster's G (ties: hybrid, ps, allreduce: the earlier keeps it).
comm::Mode chosen_mode(const TuneOptions& t, const TableRow& last) {
  auto allowed = [&](comm::Mode m) { return std::find(t.modes.begin(), t.modes.end(), m) != t.modes.end(); };
  std::optional<comm::Mode> best;
  for (comm::Mode m : {comm::Mode::hybrid, comm::Mode::ps, comm::Mode::allreduce}) {
    if (!allowed(m) || (m == comm::Mode::hybrid && !t.hybrid_possible())) continue;
    if (!best || last.speedup(m) > last.speedup(*best)) best = m;
  }
  DT_CHECK(best.has_value(), "chosen_mode: no mode allowed (cmd_tune checks --modes)");
  return *best;
}

// The tuned job: the mode with the best predicted speedup on the cluster at
// G = n·g (chosen_mode), the chosen minibatch, the scaled learning rate
// (`capped` when the linear rule's factor hit --max-lr-scale).
TrainConfig tuned_job(const TuneOptions& t, const TrainConfig& cfg, const TableRow& last, int minibatch,
                      bool* capped) {
  const int g = last.g;
  TrainConfig tuned = cfg;
  tuned.minibatch = minibatch;
  tuned.threads = cfg.threads;  // 0 stays 0: the trainer divides the cores among the ranks it finds
  // No output paths: each run of the tuned job gets the trainer's own run folder.
  tuned.metrics.clear();
  tuned.save_params.clear();
  const comm::Mode mode = g == 1 ? comm::Mode::allreduce : chosen_mode(t, last);
  tuned.mode = mode;
  tuned.ps = mode == comm::Mode::hybrid ? last.hybrid_servers : mode == comm::Mode::ps ? last.ps_servers : 0;
  tuned.ranks_per_node = g > 1 && t.nodes > 1 ? t.workers_per_node : 0;  // hybrid's nodes; the others record it
  const int base = t.base_batch > 0 ? t.base_batch : cfg.minibatch;
  perf::ScaledLr lr = perf::scale_lr(cfg.lr, base, minibatch * g, std::min(5.0, 0.1 * cfg.epochs));
  // The linear rule holds up to a point (Goyal et al.: ResNet-50 to 8k); past it
  // training diverges, so the factor is capped (--max-lr-scale, default 4).
  // LeNet-5 on Fashion-MNIST, global batch 1024 (4 × 256), 3 epochs: lr 0.2
  // (×4 of 0.05 @ 64) reaches 77.7 %, lr 0.4 (×8) and 0.8 (×16) stay at chance.
  *capped = lr.lr > cfg.lr * t.max_lr_scale;
  if (*capped) {
    lr.lr = cfg.lr * t.max_lr_scale;
    std::printf("lr: the linear rule's factor %s is capped at %s (option 'max-lr-scale')\n",
                format::shortest(static_cast<double>(minibatch) * g / base).c_str(),
                format::shortest(t.max_lr_scale).c_str());
  }
  if (int64_t{minibatch} * g < base)  // a base batch meant per worker, or a typo, silently shrank lr (1e9: lr × 3e-5)
    std::fprintf(stderr,
                 "dtrain tune: warning: the tuned global batch %lld is below %s %d: the linear rule scales lr down "
                 "by %s, from %s to %s (base-batch is the global batch the job's lr was set for)\n",
                 static_cast<long long>(int64_t{minibatch} * g),
                 t.base_batch > 0 ? "option 'base-batch'" : "the job's minibatch (base-batch 0 or not given)", base,
                 format::shortest(static_cast<double>(minibatch) * g / base).c_str(), format::shortest(cfg.lr).c_str(),
                 format::shortest(static_cast<float>(lr.lr)).c_str());
  tuned.lr = static_cast<float>(lr.lr);
  tuned.warmup_epochs = static_cast<float>(std::max<double>(cfg.warmup_epochs, lr.warmup_epochs));
  tuned.loader_depth = std::max(2, cfg.loader_depth);
  return tuned;
}

// The tuned job's stated prediction: its mode's entries of the two tables.
std::string stated_prediction(const TuneTables& tables, comm::Mode mode) {
  auto stated = [&](const TableRow& r) {
    const perf::StepPrediction& p = r.prediction(mode);
    char b[256];
    std::snprintf(b, sizeof b, "step %.2f ms (T_O %.2f ms), S = %.2f", 1e3 * p.t_step, 1e3 * p.t_o, r.speedup(mode));
    return std::string(b);
  };
  std::string prediction = "# Predicted (engine/predict.cpp): " + stated(tables.cluster.rows.back()) + " on the cluster";
  if (tables.here) prediction += "; " + stated(tables.machine.rows.back()) + " run here (as dtrain report predicts)";
  return prediction;
}

// The tuned job file and the profile (with both tables as printed: what
// `dtrain report` gives for the same shapes).
void write_tuned(const TuneOptions& t, const TrainConfig& cfg, const TrainConfig& tuned, const Profile& prof,
                 const TuneTables& tables, const std::string& prediction, bool capped) {
  const int g = tables.cluster.rows.back().g;
  const int base = t.base_batch > 0 ? t.base_batch : cfg.minibatch;
  std::ostringstream job;
  job << "# Tuned by dtrain tune for " << t.nodes << " node(s) × " << t.workers_per_node << " worker(s) from "
      << (cfg.job.empty() ? std::string("the command line") : cfg.job) << ".\n# Run: "
      << (g + tuned.ps > 1 ? "mpirun -np " + std::to_string(g + tuned.ps) + " " : std::string())
      << shell_word(this_program()) << " train --job "
      << shell_word(std::filesystem::absolute(t.out).lexically_normal().string())
      << (g + tuned.ps > 1 ? "   (where ranks outnumber cores: mpirun --oversubscribe)" : "") << "\n"
      << prediction << ".\n# lr " << format::shortest(cfg.lr)
      << " for global batch " << base << " scaled to "
      << tuned.minibatch * g << " (Goyal et al. 2017" << (capped ? ", capped by max-lr-scale" : "")
      << "); profile: " << t.out << ".profile.json\n"
      << job_file_text(tuned);
  nlohmann::json pj = prof.to_json();
  pj["tables"] = {{"cluster", tables.cluster.to_json()}};
  if (tables.here) pj["tables"]["machine"] = tables.machine.to_json();
  write_tune_outputs(t.out, job.str(), pj.dump(1) + "\n", t.overwrite);
}

}  // namespace

void write_tune_outputs(const std::string& out, const std::string& job_text, const std::string& profile_text,
                        bool overwrite) {
  namespace fs = std::filesystem;
  if (const fs::path parent = fs::path(out).parent_path(); !parent.empty()) {
    std::error_code ec;  // checked writable before profiling (check_tune_outputs); a failure shows below
    fs::create_directories(parent, ec);
  }
  const std::string profile = out + ".profile.json";
  // Both written whole under temporary names first: a full disk fails here,
  // before either final name exists.
  io::TempName profile_tmp(io::temp_name_for(profile)), job_tmp(io::temp_name_for(out));
  for (const auto& [tmp, text, path] : {std::tuple{&profile_tmp, &profile_text, &profile},
                                        std::tuple{&job_tmp, &job_text, &out}}) {
    const std::string why = io::write_file_synced(tmp->path(), *text);
    if (!why.empty()) DT_FAIL("dtrain tune: option 'out': cannot write '", *path, "' (as ", tmp->path(), "): ", why);
  }
  // Moved into place, the profile first and the job file (what users run) last.
  // Without --overwrite a name that appeared since check_tune_outputs (another
  // tune with the same --out) is refused, not replaced: rename_new is atomic.
  auto place = [&](io::TempName& tmp, const std::string& path) {
    if (overwrite) {
      tmp.rename_to(path);
    } else if (!tmp.rename_new(path)) {
      DT_USAGE("dtrain tune: option 'out': '", path,
               "' appeared while tune ran (another tune with the same --out?); refusing to overwrite it: "
               "choose another --out, or pass --overwrite true");
    }
  };
  place(profile_tmp, profile);
  try {
    place(job_tmp, out);
  } catch (...) {
    // No profile of ours left without its job file (with --overwrite the old one is gone already).
    if (!overwrite) ::unlink(profile.c_str());
    throw;
  }
  const fs::path parent = fs::path(out).parent_path();
  io::fsync_path(parent.empty() ? std::string(".") : parent.string(), true);  // the renames themselves
}

int check_tune_job(const TuneOptions& t, const TrainConfig& cfg) {
  // A stand-in job (engine/compute_stand_in.hpp) spends a fixed time per step
  // whatever its minibatch: tune would profile the model's real compute, then
  // write a job that does not run it (and no minibatch to choose).
  if (cfg.compute_stand_in_ms > 0)
    DT_USAGE("dtrain tune: the job sets option 'compute-stand-in-ms' (", format::shortest(cfg.compute_stand_in_ms),
             " ms per step instead of forward and backward): tune measures the model's own compute, which that job "
             "does not run; give --compute-stand-in-ms 0 to tune the real job, or --compute-stand-in-ms 0 --t-c-ms ",
             format::shortest(cfg.compute_stand_in_ms), " to predict with that T_C");
  int classes = 0;
  std::unique_ptr<io::Dataset> train_set, test_set;
  if (!cfg.train_data.empty()) {
    train_set = open_job_dataset(cfg.train_data, "train-data");
    classes = train_set->classes();
    // A candidate whose global batch the training set cannot fill gives a job
    // file train refuses (engine/train_job.cpp): named here, before profiling.
    int64_t n = train_set->n();
    if (cfg.max_train_samples > 0) n = std::min(n, cfg.max_train_samples);
    const int64_t workers = int64_t{t.nodes} * t.workers_per_node;
    for (const int x : t.candidates)
      if (workers * x > n)
        DT_USAGE("dtrain tune: option 'candidates': ", x, " × ", workers, " worker(s) = ", workers * x,
                 " images per step, more than the ", n, " of the training set ", cfg.train_data,
                 n < train_set->n() ? " (with max-train-samples)" : "", ": train would refuse that job");
  }
  if (!cfg.test_data.empty()) test_set = open_job_dataset(cfg.test_data, "test-data");  // the tuned job names it
  // The job's model, its data through the loader's transforms and its mean/std
  // as train checks them (engine/train_job.cpp), in both modes, before
  // profiling: a mean of the wrong length failed inside the profiling as an
  // internal check, and what-if mode (--t-c-ms), which profiles nothing, wrote
  // jobs train refused (28×28×1 Fashion-MNIST for AlexNet's 227×227×3).
  const layers::Shape in = make_job_net(cfg, 1, classes).input_shape();
  const int outputs = std::max(classes, test_set ? test_set->classes() : 0);  // train's model has as many
  if (train_set) check_fits(*train_set, input_transform(cfg, in, true), outputs, "train-data");
  if (test_set) check_fits(*test_set, input_transform(cfg, in, false), outputs, "test-data");
  check_normalization(cfg, in.c());
  // A value holding '#' would read back cut at it (a comment) from the tuned
  // job file, one that starts or ends with white space trimmed (another file).
  {
    std::istringstream lines(job_file_text(cfg));
    std::string line;
    while (std::getline(lines, line)) {
      const size_t eq = line.find(" = ");
      if (line.empty() || line[0] == '#' || line[0] == '[' || eq == std::string::npos) continue;
      const std::string value = line.substr(eq + 3);
      if (value.find('#') != std::string::npos)
        DT_USAGE("option '", line.substr(0, eq), "': '", visible(value),
                 "' holds '#', which the tuned job file would read as the start of a comment (rename it)");
      if (!value.empty() && (std::isspace(static_cast<unsigned char>(value.front())) ||
                             std::isspace(static_cast<unsigned char>(value.back()))))
        DT_USAGE("option '", line.substr(0, eq), "': '", visible(value),
                 "' starts or ends with white space, which the tuned job file would read without it (rename it)");
    }
  }
  return classes;
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
  // node of this kind running workers_per_node workers (its cores shared among them).
  prof.threads = cfg.threads > 0 ? cfg.threads : std::max(1, static_cast<int>(cores) / t.workers_per_node);
  prof.load_before = load_average_1m();
  const int classes = check_tune_job(t, cfg);
  measure_memory(cfg.model, classes, prof);
  // The candidates that fit the budget: only those are profiled.
  const double budget = memory_budget(t, rank, world);
  std::vector<bool> fits(t.candidates.size());
  for (size_t i = 0; i < t.candidates.size(); ++i)
    fits[i] = prof.fixed_bytes + prof.per_sample_bytes * t.candidates[i] <= budget;
  if (std::find(fits.begin(), fits.end(), true) == fits.end())
    DT_USAGE("dtrain tune: no minibatch in option 'candidates' fits ", budget / 1e9, " GB per worker (",
             prof.fixed_bytes / 1e6, " MB + ", prof.per_sample_bytes / 1e6,
             " MB per image; option 'device-memory-gb' sets the budget)");
  rank0_usage_check(world, [&] { check_tune_outputs(t); });

  measure_links(t, cfg, world, size, prof);
  // The cost of a sleeping wait (comm/wait.hpp), on rank 0 while the others sleep.
  if (rank == 0) prof.poll_fraction = comm::measure_poll_cost(400, &prof.poll_period);
  // T_U with a given T_C: given, or measured by every rank at once (the workers
  // of an allreduce step update together, on the cores they have: on a cluster
  // their own, on an emulated one this machine's), the median of the ranks.
  prof.t_c_given = t.t_c_ms > 0;
  if (t.t_u_ms > 0) prof.update_s = t.t_u_ms * 1e-3;
  if (t.t_u_ms < 0) {
    sleeping_barrier(world);
    const double mine = measure_update_time(cfg, prof.threads);
    std::vector<double> all(static_cast<size_t>(size));
    DT_CHECK_MPI(MPI_Gather(&mine, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, 0, world));
    if (rank == 0) prof.update_s = median(all);
  }
  sleeping_barrier(world);
  std::vector<CandidateProfile> measured(t.candidates.size());
  if (t.t_c_ms <= 0)
    for (size_t i = 0; i < t.candidates.size(); ++i)
      if (fits[i])  // the same on every rank: budget was broadcast
        measured[i] = profile_candidate(t, cfg, prof, t.candidates[i], rank, size, world);
  if (rank != 0) {
    sleeping_barrier(world);
    return kExitOk;
  }
  const ComputePoint& best = print_candidates(t, cfg, budget, fits, measured, prof);
  const TuneTables tables = print_tables(t, cfg, prof, best);
  bool capped = false;
  const TableRow& last = tables.cluster.rows.back();
  const TrainConfig tuned = tuned_job(t, cfg, last, best.minibatch, &capped);
  if (last.g == 1)
    std::printf("\nmode allreduce: one worker exchanges nothing (--modes applies from 2 workers)\n");
  if (last.g > 1) {
    auto two = [](double v) {
      char b[32];
      std::snprintf(b, sizeof b, "%.2f", v);
      return std::string(b);
    };
    std::string others;
    for (comm::Mode m : {comm::Mode::ps, comm::Mode::hybrid, comm::Mode::allreduce})
      if (m != tuned.mode && (m != comm::Mode::hybrid || t.hybrid_possible()))
        others += std::string(others.empty() ? "" : ", ") + comm::mode_name(m) + " " +
                  two(last.speedup(m)) +
                  (std::find(t.modes.begin(), t.modes.end(), m) == t.modes.end() ? " (not in --modes)" : "");
    std::printf("\nmode %s: predicted S = %.2f at G = %d on the cluster (%s)\n", comm::mode_name(tuned.mode),
                last.speedup(tuned.mode), last.g, others.c_str());
  }
  const std::string prediction = stated_prediction(tables, tuned.mode);
  write_tuned(t, cfg, tuned, prof, tables, prediction, capped);
  std::printf("\nwrote %s (mode %s, ps %d, minibatch %d, lr %s, warm-up %s epochs) and %s.profile.json\n%s\n",
              t.out.c_str(), comm::mode_name(tuned.mode), tuned.ps, tuned.minibatch, format::shortest(tuned.lr).c_str(),
              format::shortest(tuned.warmup_epochs).c_str(), t.out.c_str(), prediction.c_str() + 2);
  sleeping_barrier(world);
  return kExitOk;
}

}  // namespace dtrain::engine
