// engine/main.cpp — the dtrain front end: subcommand dispatch, MPI start-up,
// and the one place where an Error becomes a message and an exit code
// (engine/exit.hpp: a usage error every rank shares is printed once and every
// rank exits 2; any other failure is printed by its rank, then MPI_Abort).
#include <malloc.h>
#include <mpi.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <optional>
#include <exception>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/settings.hpp"
#include "engine/bench_io.hpp"
#include "engine/preemption.hpp"
#include "engine/commands.hpp"
#include "engine/exit.hpp"
#include "engine/options.hpp"  // visible
#include "engine/placement.hpp"
#include "engine/report.hpp"
#include "engine/tune.hpp"
#include "engine/version.hpp"

namespace {

int run(const std::string& cmd, const std::vector<std::string>& args) {
  using namespace dtrain::engine;
  if (cmd == "train") return cmd_train(args);
  if (cmd == "data") return cmd_data(args);
  if (cmd == "model") return cmd_model(args);
  if (cmd == "tune") return cmd_tune(args);
  if (cmd == "report") return cmd_report(args);
  if (cmd == "bench") {
    if (!args.empty() && args[0] == "comm") return cmd_bench_comm({args.begin() + 1, args.end()});
    if (!args.empty() && args[0] == "io") return cmd_bench_io({args.begin() + 1, args.end()});
    if (!args.empty() && args[0] == "compute") return cmd_bench_compute({args.begin() + 1, args.end()});
    static const char* const kBenchUsage =
        "usage: dtrain bench comm | io | compute [options]\n"
        "  comm     the exchange against MPI_Allreduce and the ping-pong: mpirun -np N dtrain bench comm [--ps S]\n"
        "  io       the loader's images/s and its exposed I/O wait per step: dtrain bench io --data F\n"
        "  compute  one worker's training step alone, per layer, against the GEMM peak: dtrain bench compute --model M\n"
        "'dtrain bench <benchmark> --help' lists its options.\n";
    if (!args.empty() && (args[0] == "--help" || args[0] == "-h" || args[0] == "help")) {
      if (args.size() > 1)
        DT_USAGE("dtrain bench: '", args[0], "' takes nothing after it, got '", args[1],
                 "' (for a benchmark's options: dtrain bench <benchmark> --help)");
      std::fputs(kBenchUsage, stdout);
      return dtrain::kExitOk;
    }
    if (!args.empty() && args[0].starts_with('-')) {
      // `dtrain bench --data F io`: the benchmark's name comes first.
      for (const std::string& a : args)
        if (a == "comm" || a == "io" || a == "compute")
          DT_USAGE("dtrain bench: the benchmark comes before its options: dtrain bench ", a, " ", args[0], " …, got '",
                   args[0], "' first\n", kBenchUsage);
      DT_USAGE("dtrain bench: which benchmark? (it comes before its options, got '", args[0], "')\n", kBenchUsage);
    }
    DT_USAGE("dtrain bench: ", args.empty() ? "which benchmark?" : "unknown benchmark '" + visible(args[0]) + "'", "\n",
             kBenchUsage);
  }
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(usage().c_str(), stdout);
    return dtrain::kExitOk;
  }
  if (cmd == "--version" || cmd == "version") {  // for bug reports and a run's provenance
    if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
      std::printf("dtrain --version: the commit this binary was built from, its compiler and libraries\n");
      return dtrain::kExitOk;
    }
    if (!args.empty()) DT_USAGE("dtrain ", cmd, " takes nothing after it, got '", visible(args[0]), "'");
    std::printf("dtrain, %s\n%s\n", dtrain::engine::build_commit(), dtrain::engine::build_facts());
    return dtrain::kExitOk;
  }
  const std::string near = dtrain::engine::nearest_word(cmd, {"train", "data", "model", "tune", "report", "bench"});
  DT_USAGE("unknown command '", visible(cmd), "'", near.empty() ? std::string() : " (did you mean " + near + "?)", "\n",
           usage());
}

// Every rank of one launch must run the same subcommand ("train", "bench
// comm", …): an MPMD launch that started another on some rank left the others
// waiting in their first collective, silent, until the start-up guard's 300 s
// (a helper's finding, 2026-12-04). The first collective of every dtrain
// process is therefore this one: an allgather of each rank's subcommand, right
// after MPI_Init. Returns the rank of the first that differs from rank 0's, or
// -1; `theirs` gets its subcommand.
int rank_running_another_command(const std::string& mine, int world, std::string& theirs) {
  constexpr int kLen = 48;
  char me[kLen] = {};
  std::snprintf(me, kLen, "%s", mine.c_str());
  std::vector<char> all(size_t(kLen) * size_t(world));
  MPI_Allgather(me, kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, MPI_COMM_WORLD);
  for (int r = 1; r < world; ++r)
    if (std::strncmp(all.data(), all.data() + size_t(r) * kLen, kLen) != 0) {
      theirs.assign(all.data() + size_t(r) * kLen, strnlen(all.data() + size_t(r) * kLen, kLen));
      return r;
    }
  return -1;
}

// Rank 0, once every rank is through MPI_Init and the first collective:
// creates `path` (DTRAIN_STARTED_FILE; written to PATH.tmp, then renamed).
// From then on no rank is inside MPI_Init, so a step that dies later did not
// die of a start-up race; slurm/train.sbatch relaunches a step
// that died before the file existed (slurm/README.md "Start-up crashes").
// Returns false, with a message, when the file cannot be written: the job
// must then end, since a later crash would be taken for a start-up one and
// the run started again from its beginning (a helper's finding, 2026-12-05).
bool mark_started(const std::string& path, int world) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  bool ok = f != nullptr;
  if (f) {
    const std::time_t now = std::time(nullptr);
    char when[32] = "?";
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S%z", std::localtime(&now));
    ok = std::fprintf(f, "%d rank(s) through MPI_Init and the first collective at %s\n", world, when) > 0;
    ok = std::fclose(f) == 0 && ok;
  }
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::fprintf(stderr,
                 "dtrain: error: cannot write DTRAIN_STARTED_FILE '%s': %s (slurm/train.sbatch's start mark: without it "
                 "a later crash would be relaunched from the beginning; free the folder or unset the variable)\n",
                 path.c_str(), std::strerror(errno));
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

// Runs the command; a failure becomes its message and exit code through the
// exit protocol (engine/exit.hpp: under MPI once exit_init ran, else printed).
int run_guarded(const std::string& cmd, const std::vector<std::string>& args) {
  if (cmd.empty()) {
    std::fputs(dtrain::engine::usage().c_str(), stderr);
    return dtrain::kExitUsage;
  }
  int code = dtrain::kExitOk;
  try {
    code = run(cmd, args);
  } catch (...) {
    code = dtrain::engine::exit_on_error(std::current_exception());
  }
  std::fflush(stdout);
  std::fflush(stderr);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // batch jobs have no terminal
  // Allocations of 128 KiB and more are mapped and unmapped whole (glibc would
  // otherwise raise its threshold after the first large free and serve later
  // ones from a heap it cannot trim): the buffers a long run allocates and
  // frees again — HDF5's caches of each checkpoint file, evaluation and
  // checkpoint snapshots — then return their memory, and resident memory stays
  // flat over days (docs/reliability.md "Memory"). The training loop itself
  // allocates nothing per step.
  mallopt(M_MMAP_THRESHOLD, 128 << 10);
  // Before any thread starts (MPI's, the start-up guard's, the loader's): with
  // OMP_PROC_BIND the OpenMP runtime pinned this thread to its first place, and
  // they would all inherit that one core (engine/placement.hpp).
  dtrain::engine::widen_initial_thread();
  const std::string cmd = argc >= 2 ? argv[1] : "";
  const std::vector<std::string> args(argc >= 2 ? argv + 2 : argv + argc, argv + argc);
  const bool mpi = cmd == "train" || cmd == "bench" || cmd == "tune";  // tune: ping-pong
  // Commands without MPI (data, model, report, help) started by mpirun: rank 0
  // alone runs them and the others exit with its code, so a table or an error
  // is printed once, not once per rank.
  const bool serial_under_mpi = !mpi && dtrain::settings::started_by_mpirun();
  int rank = 0, world = 1;
  // Before MPI_Init: a stop request (SIGUSR1/SIGTERM) that arrives while the
  // job starts is kept for the first step boundary (engine/preemption.hpp).
  if (cmd == "train") {
    dtrain::engine::install_stop_handlers();
    dtrain::engine::arm_startup_guard();  // until the liveness ring runs
  }
  if (mpi || serial_under_mpi) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, mpi ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    const std::string label = "dtrain " + cmd + (cmd == "bench" && !args.empty() ? " " + args[0] : "");
    std::string theirs;
    if (const int other = world > 1 ? rank_running_another_command(label, world, theirs) : -1; other >= 0) {
      if (rank == 0)
        std::fprintf(stderr,
                     "dtrain: error: rank %d runs '%s', rank 0 '%s': every rank of one launch must run the same "
                     "command (an MPMD launch or appfile with another command?)\n",
                     other, theirs.c_str(), label.c_str());
      std::fflush(stderr);
      MPI_Finalize();
      return dtrain::kExitUsage;
    }
    // Every rank learns whether rank 0 could write the start mark (one
    // broadcast, after the allgather: no rank is inside MPI_Init any more).
    int marked = 1;
    if (const auto path = dtrain::settings::started_file()) {
      if (rank == 0) marked = mark_started(*path, world);
      MPI_Bcast(&marked, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    if (!marked) {
      std::fflush(stderr);
      MPI_Finalize();
      return dtrain::kExitFailure;
    }
  }
  if (serial_under_mpi) {
    int code = dtrain::kExitOk;
    if (rank == 0) code = run_guarded(cmd, args);
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return code;
  }
  if (!mpi) return run_guarded(cmd, args);
  if (world > 1) dtrain::set_error_rank(rank);
  dtrain::engine::exit_init(MPI_COMM_WORLD);
  const int code = run_guarded(cmd, args);
  dtrain::engine::exit_finalize();
  return code;
}
