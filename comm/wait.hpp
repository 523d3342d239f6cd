// comm/wait.hpp — how a rank waits for MPI requests: spin or sleep.
//
// MPI_Wait* spin on a core until the request completes (OpenMPI's default;
// under --oversubscribe it adds sched_yield). On a node whose ranks and their
// compute threads outnumber the cores (parameter servers on the workers'
// node, several workers per core in a scaling study), a spinning server or
// communication thread takes time slices from the ranks that compute, and
// every step pays for it. The sleeping policy polls with MPI_Test* instead:
// busy for the first kSpinS seconds (a reply that is on its way costs no
// sleep), then sleeping between polls, from kSleepMinS doubling to
// kSleepMaxS — what OMP_WAIT_POLICY=passive and NCCL's proxy do for the same
// reason. The cost: up to kSleepMaxS of extra latency per wait that outlasts
// the spin phase.
//
// The policy is process-wide and set once by the engine before the exchange
// starts (set_wait_policy); the default is spin (MPI's own behaviour).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace dtrain::comm {

enum class WaitPolicy { spin, sleep };

// --wait-policy spin | sleep | auto. auto: sleep when the node's ranks and
// their compute threads exceed its cores (ranks_on_node · threads_per_rank >
// cores: servers or extra workers share cores with computing ranks), else
// spin. Measured on 2 cores, LeNet-5, minibatch 64: 2 workers allreduce run as
// fast or faster spinning (no core is shared); 4 workers + 2 servers (ps)
// ran 21–24 ms per step sleeping against 21–30 ms spinning.
// Throws UsageError naming option 'wait-policy' for anything else.
WaitPolicy choose_wait_policy(const std::string& name, int ranks_on_node, int threads_per_rank, int cores);
const char* wait_policy_name(WaitPolicy p);

void set_wait_policy(WaitPolicy p);
WaitPolicy wait_policy();

inline constexpr double kSpinS = 100e-6;      // busy polling before the first sleep
inline constexpr double kSleepMinS = 20e-6;   // first sleep
inline constexpr double kSleepMaxS = 200e-6;  // longest sleep between two polls

// The cost of a sleeping wait that lasts, measured here: `polls` polls of a
// request that never completes, each an MPI_Test and a sleep of kSleepMaxS.
// Returns the fraction of a core the waiting thread uses (CPU seconds over wall
// seconds, getrusage) and stores the wall seconds per poll (the sleep plus the
// timer's slack) in *period_s.
double measure_poll_cost(int polls, double* period_s);

// How long a wait has lasted while this process ran. Read at least every
// max_gap_s while waiting; a read that comes more than max_gap_s after the
// previous one means this process itself was stopped (SIGSTOP, Ctrl-Z on
// mpirun, Slurm's `scontrol suspend`, gang scheduling) or starved of its core,
// and the wait restarts from that read: the peers were suspended with it, or
// their silence was not their fault. Without it a whole job suspended for
// longer than --comm-timeout aborted the moment it was continued. The rule of
// the heartbeat's watchdog (watchdog.cpp), the exchange's --comm-timeout
// (step_channel.cpp, WaitDeadline below) alike.
class LiveTimer {
 public:
  using Clock = std::chrono::steady_clock;
  // max_gap_s is capped at 1e9 s (a "forever" timeout of 1e30 s would overflow the clock's ticks).
  explicit LiveTimer(double max_gap_s)
      : max_gap_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::min(max_gap_s, 1e9)))) {}
  // Starts (or restarts) the wait at `now`.
  void start(Clock::time_point now) { start_ = last_ = now; }
  // Seconds waited at `now` since start(), or since the last read that came
  // after a gap of more than max_gap_s (itself the new start).
  double elapsed(Clock::time_point now) {
    if (now - last_ > max_gap_) start_ = now;
    last_ = now;
    return std::chrono::duration<double>(now - start_).count();
  }

 private:
  Clock::duration max_gap_;
  Clock::time_point start_{}, last_{};
};

// MPI_Wait under the process's policy, for callers outside comm/ (the
// engine's stop agreement, engine/preemption.hpp).
void wait_request(MPI_Request& req);

namespace detail {
// A deadline on this thread's waits below, for a step that runs on the
// caller's thread (an inline allreduce step, exchange.cpp): while one is
// alive, those waits poll (MPI_Test*, busy under the spin policy) and call
// on_expiry once timeout_s has passed since the first of them found its
// requests incomplete (the clock is read only then: a step whose messages
// are already there reads none), not counting a time this process was
// stopped (LiveTimer, with a gap of timeout_s / 2); on_expiry must not return (it ends the job:
// StepChannel::abort_stalled). timeout_s ≤ 0: no deadline. One per thread at
// a time; not copyable.
class WaitDeadline {
 public:
  WaitDeadline(double timeout_s, std::function<void()> on_expiry);
  ~WaitDeadline();
  WaitDeadline(const WaitDeadline&) = delete;
  WaitDeadline& operator=(const WaitDeadline&) = delete;

  // Calls on_expiry when the deadline has passed (wait.cpp's polls).
  void check(std::chrono::steady_clock::time_point now);

 private:
  double timeout_s_;
  LiveTimer waited_;
  bool armed_ = false;
  std::function<void()> on_expiry_;
};

// Like MPI_Waitall / MPI_Waitsome / MPI_Wait, under the process's policy.
// wait_all clears `reqs`. wait_some fills idx[0..count) with the indices of
// completed requests and returns count (MPI_UNDEFINED when none is active).
void wait_all(std::vector<MPI_Request>& reqs);
int wait_some(std::vector<MPI_Request>& reqs, std::vector<int>& idx);
void wait_one(MPI_Request& req);
}  // namespace detail

}  // namespace dtrain::comm
