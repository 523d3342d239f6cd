// engine/preemption.hpp — stop requests (SIGUSR1, SIGTERM) and the agreement
// of all ranks on the step at which the job checkpoints and stops.
//
// The handler only sets a flag (async-signal-safe: a std::sig_atomic_t):
// checkpointing inside a handler could be killed half-way or catch the model
// mid-backward. The training loop polls the flag at step boundaries.
//
// Agreement (StopAgreement, over the workers): at every step boundary each
// worker starts a non-blocking MPI_BOR allreduce of its flags (its own signal,
// or a server's reported in the step's status, comm::StepTimes) and completes
// the one started at the previous boundary. Every worker thus learns the same
// OR at the same boundary, one step after the earliest request, without a
// blocking collective on the critical path; the workers then take one
// checkpoint of that step together with the servers (request_checkpoint) and
// every rank exits with kExitRequeue (core/error.hpp).
#pragma once

#include <mpi.h>

#include <cstdint>

namespace dtrain::engine {

// Installs the SIGUSR1 / SIGTERM handlers (idempotent). `dtrain train` does
// it first thing, before MPI_Init, so that a stop request during start-up is
// not lost: it is acted on at the first step boundaries.
void install_stop_handlers();
// A job without a checkpoint folder: the default actions come back, and a
// signal that arrived meanwhile is raised again (it ends the process).
void restore_default_stop_actions();
// The signal that asked this process to stop (SIGUSR1, SIGTERM), else 0.
int stop_signal();
// Test only: as if `sig` had arrived.
void request_stop(int sig);
// Test only (DTRAIN_SIGNAL_AT_STEP, core/settings.hpp): raises the signal on
// this process when `step` and `world_rank` are the ones named.
void maybe_raise_test_signal(int64_t step, int world_rank);

// Start-up guard: `dtrain train` arms it before MPI_Init; the trainer disarms
// it once the liveness ring runs (comm/watchdog.hpp) — from then on a stuck
// rank is named by its neighbour. Until then nothing can name it: a rank
// stopped or unreachable inside MPI_Init or the first collective blocks every
// other rank there. When the guard fires (settings::startup_timeout_s) it
// prints one line naming this rank's host and what it waited for, and exits 1
// (MPI_Abort once MPI is up), which makes the launcher end the job.
void arm_startup_guard();
void disarm_startup_guard();

class StopAgreement {
 public:
  // workers: the workers' communicator (duplicated here); MPI_COMM_NULL in a
  // 1-rank job (then the decision is the local flag itself).
  explicit StopAgreement(MPI_Comm workers);
  ~StopAgreement();
  StopAgreement(const StopAgreement&) = delete;
  StopAgreement& operator=(const StopAgreement&) = delete;

  // At a step boundary, on every worker (collective, in the same order):
  // contributes the bits `local` and returns the OR over the workers of the
  // bits contributed at the previous boundary (0 at the first). The caller
  // gives the bits their meaning (engine/worker_loop.cpp: stop, checkpoint
  // due by time). In a 1-rank job: `local` itself, at once.
  uint32_t poll(uint32_t local);
  // Before leaving normally: completes the reduction in flight.
  void finish();

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Request req_ = MPI_REQUEST_NULL;
  uint32_t send_ = 0, recv_ = 0;
};

}  // namespace dtrain::engine
