// engine/preemption.cpp — stop handlers and StopAgreement (preemption.hpp).
#include "engine/preemption.hpp"

#include <csignal>
#include <optional>
#include <string>

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

int stop_signal() { return g_stop_signal; }
void request_stop(int sig) { on_stop_signal(sig); }

void maybe_raise_test_signal(int64_t step, int world_rank) {
  static const std::optional<long> at = settings::signal_at_step();
  if (!at || *at != step || settings::signal_rank() != world_rank) return;
  const std::string name = settings::signal_name();
  DT_CHECK(name == "USR1" || name == "TERM", "DTRAIN_SIGNAL=", name, ": expected USR1 or TERM");
  std::raise(name == "USR1" ? SIGUSR1 : SIGTERM);
}

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

bool StopAgreement::poll(bool local) {
  if (comm_ == MPI_COMM_NULL) return local;
  bool stop = false;
  if (req_ != MPI_REQUEST_NULL) {
    DT_CHECK_MPI(MPI_Wait(&req_, MPI_STATUS_IGNORE));
    stop = recv_ != 0;
  }
  if (stop) return true;
  send_ = local ? 1 : 0;
  DT_CHECK_MPI(MPI_Iallreduce(&send_, &recv_, 1, MPI_INT32_T, MPI_MAX, comm_, &req_));
  return false;
}

void StopAgreement::finish() {
  if (req_ != MPI_REQUEST_NULL) DT_CHECK_MPI(MPI_Wait(&req_, MPI_STATUS_IGNORE));
}

}  // namespace dtrain::engine
