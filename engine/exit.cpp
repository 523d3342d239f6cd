// engine/exit.cpp — the exit protocol of engine/exit.hpp.
#include "engine/exit.hpp"

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "core/error.hpp"

namespace dtrain::engine {

namespace {
MPI_Comm g_exit_comm = MPI_COMM_NULL;
int g_rank = 0, g_size = 1;

void flush_all() {
  std::fflush(stdout);
  std::fflush(stderr);
}

void print(const std::string& msg) {
  // One newline ends every message, also one that ends with a usage text.
  const size_t end = msg.find_last_not_of('\n');
  std::fprintf(stderr, "dtrain: error: %s\n", end == std::string::npos ? "" : msg.substr(0, end + 1).c_str());
  flush_all();
}

// True when every rank of the world joined the agreement within timeout_s;
// *lowest = the lowest rank among them (then 0).
bool agree_all_failed(double timeout_s, int* lowest) {
  int mine = g_rank;
  MPI_Request req = MPI_REQUEST_NULL;
  if (MPI_Iallreduce(&mine, lowest, 1, MPI_INT, MPI_MIN, g_exit_comm, &req) != MPI_SUCCESS) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    int done = 0;
    if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (done) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}
}  // namespace

void exit_init(MPI_Comm world) {
  MPI_Comm_rank(world, &g_rank);
  MPI_Comm_size(world, &g_size);
  MPI_Comm_dup(world, &g_exit_comm);
}

int exit_on_error(std::exception_ptr e, double agreement_timeout_s) {
  std::string what;
  int code = kExitFailure;
  bool usage = false, shared = false;
  try {
    std::rethrow_exception(e);
  } catch (const SharedError& x) {
    what = x.what();
    code = x.exit_code();
    shared = true;
  } catch (const UsageError& u) {
    what = u.what();
    code = u.exit_code();
    usage = true;
  } catch (const Error& x) {
    what = x.what();
    code = x.exit_code();
  } catch (const std::exception& x) {
    what = rank_prefix() + x.what();
  } catch (...) {
    what = rank_prefix() + "unknown exception";
  }
  // The rank that prints also leaves the failure record (core/error.hpp).
  auto say = [&](const std::string& shown) {
    record_failure(what, code);
    print(shown);
  };
  if (g_exit_comm == MPI_COMM_NULL || g_size == 1) {
    say(what);
    return code;
  }
  if (usage) {
    int lowest = -1;
    if (agree_all_failed(agreement_timeout_s, &lowest)) {
      if (g_rank == lowest) say(what);
      flush_all();
      return code;  // every rank: MPI_Finalize, exit 2
    }
    say(rank_prefix() + what + " (this rank only; the others went on)");
  } else {
    // A failure every worker meets (core/error.hpp SharedError): rank 0's
    // message and abort first; the others print only if they outlive it.
    if (shared && g_rank != 0)
      std::this_thread::sleep_for(std::chrono::duration<double>(kSharedErrorGraceS));
    say(what);
  }
  // Let mpirun forward the message before its abort banner.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  MPI_Abort(MPI_COMM_WORLD, code);
  return code;  // not reached
}

void rank0_usage_check(MPI_Comm comm, const std::function<void()>& check) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::string msg;
  if (rank == 0) {
    try {
      check();
    } catch (const UsageError& e) {
      msg = e.what();
    }
  }
  int n = static_cast<int>(msg.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, comm);
  if (n == 0) return;
  msg.resize(static_cast<size_t>(n));
  MPI_Bcast(msg.data(), n, MPI_CHAR, 0, comm);
  throw UsageError(msg);
}

void exit_finalize() {
  if (g_exit_comm != MPI_COMM_NULL) MPI_Comm_free(&g_exit_comm);
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) MPI_Finalize();
}

}  // namespace dtrain::engine
