// engine/main.cpp — the dtrain front end: subcommand dispatch, MPI start-up,
// and the one place where an Error becomes a message and an exit code (and,
// with several ranks, an MPI_Abort so that no rank hangs).
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "engine/bench_io.hpp"
#include "engine/commands.hpp"
#include "engine/report.hpp"
#include "engine/tune.hpp"

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
    DT_USAGE("dtrain bench: which benchmark? (comm | io)");
  }
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(usage().c_str(), stdout);
    return dtrain::kExitOk;
  }
  DT_USAGE("unknown command '", cmd, "'\n", usage());
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // batch jobs have no terminal
  if (argc < 2) {
    std::fputs(dtrain::engine::usage().c_str(), stderr);
    return dtrain::kExitUsage;
  }
  const std::string cmd = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  const bool mpi = cmd == "train" || cmd == "bench" || cmd == "tune";  // tune: ping-pong
  int world = 1;
  if (mpi) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world > 1) dtrain::set_error_rank(rank);
  }
  int code = dtrain::kExitOk;
  try {
    code = run(cmd, args);
  } catch (const dtrain::Error& e) {
    std::fprintf(stderr, "dtrain: error: %s\n", e.what());
    code = e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtrain: error: %s\n", e.what());
    code = dtrain::kExitFailure;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  if (mpi) {
    if (code != dtrain::kExitOk && world > 1) MPI_Abort(MPI_COMM_WORLD, code);
    MPI_Finalize();
  }
  return code;
}
