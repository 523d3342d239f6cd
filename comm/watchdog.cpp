// comm/watchdog.cpp — the liveness ring (watchdog.hpp).
//
// The protocol, stated once. Messages are two int64 {kind, step} on the
// watchdog's own communicator:
//   tag kTagBeat, r → r+1: kBeat {step}  every period_s, and as soon as the
//                                          step changed (at most every 0.1 s)
//                          kBye  {step}  r leaves normally; sent after its last
//                                          beat (messages between two ranks on
//                                          one tag do not overtake each other)
//   tag kTagGone, r → r−1: kGone         r leaves: r−1 stops sending to it
// Each thread polls every 20 ms (MPI_Test, then a sleep on a condition
// variable the destructor wakes): it drains the beats that arrived from r−1,
// keeps one receive posted, sends at most one beat at a time (a beat still in
// flight, e.g. to a stopped successor, is never stacked with more), and when
// r−1 was silent for more than timeout_s prints the one-line message and calls
// MPI_Abort. A poll that comes more than timeout_s / 2 after the previous one
// means this process itself was stopped or starved: the silence is then not
// the predecessor's fault and its clock restarts (LiveTimer, wait.hpp).
// Leaving (destructor): bye to r+1 unless r+1 said gone, gone to r−1 unless
// r−1 said bye, receives cancelled; every wait is bounded (kLeaveWaitS) and a
// request that did not complete by then is freed (its buffer leaked: MPI may
// still read or write it).
#include "comm/watchdog.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "comm/wait.hpp"
#include "core/error.hpp"
#include "core/format.hpp"

namespace dtrain::comm {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTagBeat = 7101;
constexpr int kTagGone = 7102;
constexpr int kTagAlarm = 7103;      // another rank's alarm, to rank 0 (its failure record)
constexpr double kAlarmWaitS = 0.3;  // how long an alarming rank lets rank 0 record it before the abort
enum : int64_t { kBeat = 0, kBye = 1, kGone = 2 };
constexpr auto kPoll = std::chrono::milliseconds(20);
constexpr double kStepBeatS = 0.1;  // the shortest gap between two beats
constexpr double kLeaveWaitS = 0.5;  // each wait of the leaving thread
constexpr int kNameBytes = 256;      // "ROLE on HOST", truncated

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string mpi_error(int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return std::string(msg, static_cast<size_t>(len));
}

// The buffers of the thread's requests: on the heap, leaked when a request
// was abandoned (MPI may still use its buffer).
struct Buffers {
  int64_t in[2] = {0, 0};    // from the predecessor
  int64_t gone[2] = {0, 0};  // from the successor
  int64_t out[2] = {0, 0};   // the beat in flight
  int64_t bye[2] = {0, 0};   // bye or gone, leaving
};

// Completes *req within wait_s (after MPI_Cancel when cancel); else frees it.
// True when it completed.
bool settle(MPI_Request* req, double wait_s, bool cancel) {
  if (*req == MPI_REQUEST_NULL) return true;
  if (cancel) MPI_Cancel(req);
  const auto deadline = Clock::now() + std::chrono::duration<double>(wait_s);
  for (;;) {
    int done = 0;
    if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
    if (done) return true;
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (*req != MPI_REQUEST_NULL) MPI_Request_free(req);
  return false;
}

}  // namespace

std::string role_name(const Topology& topo) {
  return topo.is_server() ? "parameter server " + std::to_string(topo.server_index())
                          : "worker " + std::to_string(topo.worker_index());
}

Watchdog::Watchdog(MPI_Comm world, const std::string& role, const WatchdogOptions& o) : o_(o) {
  if (!(o.period_s > 0) || !(o.timeout_s > o.period_s))
    DT_USAGE("option 'heartbeat-timeout': ", format::shortest(o.timeout_s),
             " s must be more than the heartbeat period of ", format::shortest(o.period_s),
             " s (0 turns the watchdog off)");
  DT_CHECK_MPI(MPI_Comm_rank(world, &rank_));
  DT_CHECK_MPI(MPI_Comm_size(world, &size_));
  if (size_ == 1) return;
  DT_CHECK_MPI(MPI_Comm_dup(world, &comm_));
  DT_CHECK_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  pred_ = (rank_ + size_ - 1) % size_;
  succ_ = (rank_ + 1) % size_;
  std::vector<char> mine(kNameBytes, '\0');
  const std::string name = role + " on " + error_host();
  name.copy(mine.data(), kNameBytes - 1);
  std::vector<char> all(static_cast<size_t>(kNameBytes) * static_cast<size_t>(size_));
  DT_CHECK_MPI(MPI_Allgather(mine.data(), kNameBytes, MPI_CHAR, all.data(), kNameBytes, MPI_CHAR, comm_));
  pred_name_ = std::string(all.data() + static_cast<size_t>(pred_) * kNameBytes);
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);  // local in Open MPI; pending requests complete on their own
}

void Watchdog::report(const std::string& why, int64_t last_step) {
  const std::string step = last_step >= 0 ? ::dtrain::detail::concat("its last step: ", last_step + 1) : "it reported no step yet";
  const std::string what = ::dtrain::detail::concat("rank ", pred_, " (", pred_name_, ") stopped responding: ", why, " (", step,
                                          "); ending the job");
  record_failure(what);
  std::fprintf(stderr, "dtrain: error: %s\n", what.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  // Rank 0 keeps the job's failure record (core/error.hpp) but watches only
  // its own predecessor: the alarm goes to it too (a small, eager message),
  // and its thread, which polls every kPoll, gets kAlarmWaitS to write it
  // before the abort. Not when rank 0 is the one that stopped responding.
  if (rank_ != 0 && pred_ != 0) {
    MPI_Request req = MPI_REQUEST_NULL;
    if (MPI_Isend(what.data(), static_cast<int>(what.size()), MPI_CHAR, 0, kTagAlarm, comm_, &req) == MPI_SUCCESS &&
        settle(&req, kAlarmWaitS, false))
      std::this_thread::sleep_for(std::chrono::duration<double>(kAlarmWaitS));
  }
  MPI_Abort(MPI_COMM_WORLD, kExitFailure);
  std::_Exit(kExitFailure);  // not reached
}

void Watchdog::loop() {
  auto* b = new Buffers;
  bool abandoned = false;
  MPI_Request recv = MPI_REQUEST_NULL, gone = MPI_REQUEST_NULL, send = MPI_REQUEST_NULL;
  bool watching = true, sending = true;
  int64_t peer_step = -1;
  auto post_recv = [&] {
    const int rc = MPI_Irecv(b->in, 2, MPI_INT64_T, pred_, kTagBeat, comm_, &recv);
    if (rc != MPI_SUCCESS) report("its connection failed (MPI_Irecv: " + mpi_error(rc) + ")", peer_step);
  };
  post_recv();
  if (MPI_Irecv(b->gone, 2, MPI_INT64_T, succ_, kTagGone, comm_, &gone) != MPI_SUCCESS) sending = false;

  Clock::time_point sent_at = Clock::now();
  LiveTimer silence(o_.timeout_s / 2);  // since the predecessor's last message
  silence.start(sent_at);
  int64_t sent_step = 0;
  bool sent_any = false;
  std::unique_lock<std::mutex> lk(mu_);
  while (!quit_) {
    lk.unlock();
    const Clock::time_point now = Clock::now();
    // Every beat that arrived from the predecessor.
    while (watching) {
      int done = 0;
      const int rc = MPI_Test(&recv, &done, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) report("its connection failed (" + mpi_error(rc) + ")", peer_step);
      if (!done) break;
      silence.start(now);
      if (b->in[0] == kBye) {
        watching = false;
        break;
      }
      peer_step = b->in[1];
      post_recv();
    }
    // The successor left, or cannot be reached: its own successor watches it.
    if (sending) {
      int done = 0;
      if (MPI_Test(&gone, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done) sending = false;
    }
    // One beat at a time to the successor.
    if (sending) {
      int done = 1;
      if (send != MPI_REQUEST_NULL && MPI_Test(&send, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) sending = false;
      const int64_t step = step_.load(std::memory_order_relaxed);
      const double since = seconds(now - sent_at);
      if (sending && done && (!sent_any || since >= o_.period_s || (step != sent_step && since >= kStepBeatS))) {
        b->out[0] = kBeat;
        b->out[1] = step;
        if (MPI_Isend(b->out, 2, MPI_INT64_T, succ_, kTagBeat, comm_, &send) != MPI_SUCCESS) sending = false;
        sent_at = now;
        sent_step = step;
        sent_any = true;
      }
    }
    // Rank 0: another rank's alarm, for the failure record (see report).
    if (rank_ == 0) {
      int flag = 0;
      MPI_Status st;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kTagAlarm, comm_, &flag, &st) == MPI_SUCCESS && flag) {
        int n = 0;
        MPI_Get_count(&st, MPI_CHAR, &n);
        std::string text(static_cast<size_t>(std::max(n, 0)), '\0');
        if (MPI_Recv(text.data(), n, MPI_CHAR, st.MPI_SOURCE, kTagAlarm, comm_, MPI_STATUS_IGNORE) == MPI_SUCCESS)
          record_failure(text);
      }
    }
    // After the beats (a beat restarts it); a gap since the last poll restarts it too.
    if (const double silent_s = silence.elapsed(now); watching && silent_s > o_.timeout_s) {
      char gap[32];
      std::snprintf(gap, sizeof gap, "%.1f", silent_s);
      report(::dtrain::detail::concat("no heartbeat for ", gap, " s"), peer_step);
    }
    lk.lock();
    cv_.wait_for(lk, kPoll, [this] { return quit_; });
  }
  lk.unlock();

  // Leaving: bye after the last beat, gone to the predecessor, receives cancelled.
  if (sending) {
    abandoned |= !settle(&send, kLeaveWaitS, false);
    b->bye[0] = kBye;
    b->bye[1] = step_.load(std::memory_order_relaxed);
    MPI_Request bye = MPI_REQUEST_NULL;
    if (MPI_Isend(b->bye, 2, MPI_INT64_T, succ_, kTagBeat, comm_, &bye) == MPI_SUCCESS)
      abandoned |= !settle(&bye, kLeaveWaitS, false);
  } else {
    abandoned |= !settle(&send, 0, false);
  }
  if (watching) {
    static const int64_t kGoneMsg[2] = {kGone, 0};  // static: outlives an abandoned send
    MPI_Request req = MPI_REQUEST_NULL;
    if (MPI_Isend(kGoneMsg, 2, MPI_INT64_T, pred_, kTagGone, comm_, &req) == MPI_SUCCESS)
      settle(&req, kLeaveWaitS, false);
  }
  abandoned |= !settle(&recv, kLeaveWaitS, true);
  abandoned |= !settle(&gone, kLeaveWaitS, true);
  if (!abandoned) delete b;
}

}  // namespace dtrain::comm
