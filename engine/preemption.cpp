// engine/preemption.cpp — stop handlers and StopAgreement (preemption.hpp).
#include "engine/preemption.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <optional>
#include <string>

#include "comm/wait.hpp"
#include "core/error.hpp"
#include "core/settings.hpp"

namespace dtrain::engine {

namespace {
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) {
  if (g_stop_signal == 0) g_stop_signal = sig;
}
}  // namespace

void install_stop_handlers() {
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a read or a wait interrupted by the signal carries on
  for (int sig : {SIGUSR1, SIGTERM}) DT_CHECK(sigaction(sig, &sa, nullptr) == 0, "sigaction(", sig, ") failed");
}

void restore_default_stop_actions() {
  for (int sig : {SIGUSR1, SIGTERM}) std::signal(sig, SIG_DFL);
  if (const int sig = g_stop_signal; sig != 0) std::raise(sig);
}

int stop_signal() { return g_stop_signal; }
void request_stop(int sig) { on_stop_signal(sig); }

void maybe_raise_test_signal(int64_t step, int world_rank) {
  static const std::optional<long> at = settings::signal_at_step();
  if (!at || *at != step || settings::signal_rank() != world_rank) return;
  const std::string name = settings::signal_name();
  DT_CHECK(name == "USR1" || name == "TERM", "DTRAIN_SIGNAL=", name, ": expected USR1 or TERM");
  std::raise(name == "USR1" ? SIGUSR1 : SIGTERM);
}

namespace {
std::atomic<bool> g_startup_done{false};
}

void arm_startup_guard() {
  const double limit = settings::startup_timeout_s();
  if (limit <= 0) return;
  std::thread([limit] {
    const auto t0 = std::chrono::steady_clock::now();
    while (!g_startup_done.load()) {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > limit) {
        int init = 0, fin = 0, rank = -1;
        MPI_Initialized(&init);
        MPI_Finalized(&fin);
        if (init && !fin) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        char host[256] = "?";
        gethostname(host, sizeof host - 1);
        std::fprintf(stderr,
                     "dtrain: error: %s%s%s on %s: the job did not start within %.0f s (DTRAIN_STARTUP_TIMEOUT): "
                     "stuck in %s; a rank may be stopped, dead or unreachable\n",
                     rank >= 0 ? "rank " : "", rank >= 0 ? std::to_string(rank).c_str() : "a process",
                     "", host, limit, init ? "the job's first collectives" : "MPI_Init");
        std::fflush(stderr);
        if (init && !fin) MPI_Abort(MPI_COMM_WORLD, kExitFailure);
        std::_Exit(kExitFailure);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }).detach();
}

void disarm_startup_guard() { g_startup_done.store(true); }

StopAgreement::StopAgreement(MPI_Comm workers) {
  if (workers != MPI_COMM_NULL) DT_CHECK_MPI(MPI_Comm_dup(workers, &comm_));
}

StopAgreement::~StopAgreement() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || comm_ == MPI_COMM_NULL) return;
  // A request still in flight means we unwind from an error: leave it to the abort.
  if (req_ == MPI_REQUEST_NULL) MPI_Comm_free(&comm_);
}

uint32_t StopAgreement::poll(uint32_t local) {
  if (comm_ == MPI_COMM_NULL) return local;
  uint32_t agreed = 0;
  if (req_ != MPI_REQUEST_NULL) {
    comm::wait_request(req_);  // spins or sleeps as the process's wait policy says (comm/wait.hpp)
    agreed = recv_;
  }
  send_ = local;
  DT_CHECK_MPI(MPI_Iallreduce(&send_, &recv_, 1, MPI_UINT32_T, MPI_BOR, comm_, &req_));
  return agreed;
}

void StopAgreement::finish() {
  if (req_ != MPI_REQUEST_NULL) comm::wait_request(req_);
}

}  // namespace dtrain::engine
