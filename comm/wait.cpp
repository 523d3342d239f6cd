// comm/wait.cpp — the waits of wait.hpp.
#include "comm/wait.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include <sys/resource.h>

#include "core/error.hpp"

namespace dtrain::comm {

namespace {
using Clock = std::chrono::steady_clock;
std::atomic<WaitPolicy> g_policy{WaitPolicy::spin};

thread_local detail::WaitDeadline* t_deadline = nullptr;  // this thread's, if any

// The waits' MPI_Wait* only without a deadline under the spin policy.
bool blocking_wait() { return t_deadline == nullptr && wait_policy() == WaitPolicy::spin; }

// Polls `test` (returns true when done): under the sleeping policy, busy for
// kSpinS, then sleeping; under the spin policy (only with a deadline), busy.
// Checks this thread's deadline between polls.
template <class Test>
void poll(Test&& test) {
  if (test()) return;  // done at once: no clock read
  const bool sleep = wait_policy() == WaitPolicy::sleep;
  const auto t0 = Clock::now();
  double nap = kSleepMinS;
  do {
    const auto now = Clock::now();
    if (t_deadline) t_deadline->check(now);
    if (!sleep || std::chrono::duration<double>(now - t0).count() < kSpinS) continue;
    std::this_thread::sleep_for(std::chrono::duration<double>(nap));
    nap = std::min(2 * nap, kSleepMaxS);
  } while (!test());
}
}  // namespace

WaitPolicy choose_wait_policy(const std::string& name, int ranks_on_node, int threads_per_rank, int cores) {
  if (name == "spin") return WaitPolicy::spin;
  if (name == "sleep") return WaitPolicy::sleep;
  if (name != "auto") DT_USAGE("option 'wait-policy': '", name, "' is not spin, sleep or auto");
  DT_CHECK(ranks_on_node >= 1 && threads_per_rank >= 1 && cores >= 1, "choose_wait_policy: ranks ", ranks_on_node,
           ", threads ", threads_per_rank, ", cores ", cores);
  return static_cast<long>(ranks_on_node) * threads_per_rank > cores ? WaitPolicy::sleep : WaitPolicy::spin;
}

const char* wait_policy_name(WaitPolicy p) { return p == WaitPolicy::spin ? "spin" : "sleep"; }

void set_wait_policy(WaitPolicy p) { g_policy.store(p, std::memory_order_relaxed); }
WaitPolicy wait_policy() { return g_policy.load(std::memory_order_relaxed); }

double measure_poll_cost(int polls, double* period_s) {
  DT_CHECK(polls >= 1, "measure_poll_cost: ", polls, " polls");
  auto cpu = [] {
    rusage u{};
    getrusage(RUSAGE_THREAD, &u);
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
  };
  int buf = 0, tag = 0, flag = 0, done = 0;
  int* ub = nullptr;
  DT_CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_SELF, MPI_TAG_UB, &ub, &flag));
  tag = flag && ub ? *ub : 32767;  // a tag nobody sends on MPI_COMM_SELF
  MPI_Request req;
  DT_CHECK_MPI(MPI_Irecv(&buf, 1, MPI_INT, 0, tag, MPI_COMM_SELF, &req));
  const double c0 = cpu();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < polls; ++i) {
    DT_CHECK_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    std::this_thread::sleep_for(std::chrono::duration<double>(kSleepMaxS));
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double used = cpu() - c0;
  DT_CHECK_MPI(MPI_Cancel(&req));
  DT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
  if (period_s) *period_s = wall / polls;
  return wall > 0 ? std::clamp(used / wall, 0.0, 1.0) : 0.0;
}

namespace detail {

WaitDeadline::WaitDeadline(double timeout_s, std::function<void()> on_expiry)
    : timeout_s_(timeout_s), waited_(timeout_s / 2), on_expiry_(std::move(on_expiry)) {
  DT_CHECK(t_deadline == nullptr, "WaitDeadline: this thread already has one");
  if (timeout_s > 0) t_deadline = this;
}

WaitDeadline::~WaitDeadline() {
  if (t_deadline == this) t_deadline = nullptr;
}

void WaitDeadline::check(Clock::time_point now) {
  if (!armed_) {  // the first wait that did not complete at once starts the clock
    waited_.start(now);
    armed_ = true;
  }
  if (waited_.elapsed(now) < timeout_s_) return;
  on_expiry_();
  DT_FAIL("a wait passed its deadline");  // on_expiry should not return
}

void wait_all(std::vector<MPI_Request>& reqs) {
  if (reqs.empty()) return;
  const int n = static_cast<int>(reqs.size());
  if (blocking_wait()) {
    DT_CHECK_MPI(MPI_Waitall(n, reqs.data(), MPI_STATUSES_IGNORE));
  } else {
    poll([&] {
      int done = 0;
      DT_CHECK_MPI(MPI_Testall(n, reqs.data(), &done, MPI_STATUSES_IGNORE));
      return done != 0;
    });
  }
  reqs.clear();
}

int wait_some(std::vector<MPI_Request>& reqs, std::vector<int>& idx) {
  const int n = static_cast<int>(reqs.size());
  idx.resize(reqs.size());
  int count = 0;
  if (blocking_wait()) {
    DT_CHECK_MPI(MPI_Waitsome(n, reqs.data(), &count, idx.data(), MPI_STATUSES_IGNORE));
  } else {
    poll([&] {
      DT_CHECK_MPI(MPI_Testsome(n, reqs.data(), &count, idx.data(), MPI_STATUSES_IGNORE));
      return count != 0;  // MPI_UNDEFINED (nothing active) ends the wait too
    });
  }
  return count;
}

void wait_one(MPI_Request& req) {
  if (blocking_wait()) {
    DT_CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    return;
  }
  poll([&] {
    int done = 0;
    DT_CHECK_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    return done != 0;
  });
}

}  // namespace detail
void wait_request(MPI_Request& req) { detail::wait_one(req); }

}  // namespace dtrain::comm
