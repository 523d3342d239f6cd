// engine/timeline.cpp — Timeline (timeline.hpp): the clock alignment, the
// collection on rank 0 and the Trace Event Format writer.
#include "engine/timeline.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "comm/wait.hpp"
#include "core/error.hpp"
#include "core/format.hpp"

namespace dtrain::engine {

namespace {

constexpr int kTagPing = 1, kTagPong = 2, kTagTurn = 3, kTagData = 4;
constexpr size_t kMaxMessage = size_t{1} << 30;  // bytes per MPI message (int counts)

// What each rank tells rank 0 before its events.
struct Header {
  int32_t rank, server, node, threads;
  int64_t local0, offset0, rtt0;  // the first clock measurement
  int64_t local1, offset1, rtt1;  // the second (in write())
  uint64_t n_main, n_exchange, dropped, capacity;
  char host[64];
};

// Rank 0's time (ns since rank 0's first measurement) of a local time t of the rank h describes.
double to_us(const Header& h, int64_t origin, int64_t t) {
  double off = static_cast<double>(h.offset0);
  if (h.local1 > h.local0)  // linear drift between the two measurements
    off += static_cast<double>(h.offset1 - h.offset0) * static_cast<double>(t - h.local0) /
           static_cast<double>(h.local1 - h.local0);
  return (static_cast<double>(t - origin) + off) / 1000.0;
}

// "rank R (worker, node N, host H)": N the exchange's node index of the
// worker (0-based; virtual nodes with --ranks-per-node), "-" on a server; H
// the host name the rank ran on.
std::string track_name(const Header& h) {
  std::string s = "rank " + std::to_string(h.rank) + (h.server ? " (server" : " (worker") + ", node ";
  s += h.node >= 0 ? std::to_string(h.node) : std::string("-");
  const std::string host(h.host, strnlen(h.host, sizeof h.host));
  return s + ", host " + (host.empty() ? std::string("?") : host) + ")";
}

class JsonOut {
 public:
  explicit JsonOut(std::FILE* f) : f_(f) {}
  void event_sep() {
    std::fputs(first_ ? "\n" : ",\n", f_);
    first_ = false;
  }
  std::FILE* f() { return f_; }

 private:
  std::FILE* f_;
  bool first_ = true;
};

void write_metadata(JsonOut& out, const Header& h) {
  std::FILE* f = out.f();
  const double err_us = static_cast<double>(std::max(h.rtt0, h.rtt1)) / 2000.0;
  const double drift_us = static_cast<double>(h.offset1 - h.offset0) / 1000.0;
  out.event_sep();
  std::fprintf(f,
               "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"%s\","
               "\"host\":\"%s\",\"clock_alignment_error_us\":%.3f,\"clock_drift_us\":%.3f,\"events\":%llu,"
               "\"dropped\":%llu,\"capacity_per_thread\":%llu}}",
               h.rank, track_name(h).c_str(), h.host, err_us, drift_us,
               static_cast<unsigned long long>(h.n_main + h.n_exchange), static_cast<unsigned long long>(h.dropped),
               static_cast<unsigned long long>(h.capacity));
  out.event_sep();
  std::fprintf(f, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}",
               h.rank, h.rank);
  for (int t = 0; t < h.threads; ++t) {
    const char* name = h.server ? "serve" : t == 0 ? "main (step, loader, compute)" : "exchange thread";
    out.event_sep();
    std::fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
                 h.rank, t, name);
    out.event_sep();
    std::fprintf(f, "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
                 h.rank, t, t);
  }
}

void write_events(JsonOut& out, const Header& h, int64_t origin, const timeline::Event* ev, size_t n, int tid) {
  using timeline::Kind;
  std::FILE* f = out.f();
  for (size_t i = 0; i < n; ++i) {
    const timeline::Event& e = ev[i];
    const double ts = to_us(h, origin, e.t0_ns);
    const double dur = std::max(0.0, to_us(h, origin, e.t1_ns) - ts);
    out.event_sep();
    std::fprintf(f, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d,"
                 "\"args\":{\"step\":%lld",
                 timeline::kind_name(e.kind), timeline::kind_category(e.kind), ts, dur, h.rank, tid,
                 static_cast<long long>(e.step));
    if (e.bytes > 0 || e.index >= 0) std::fprintf(f, ",\"bytes\":%llu", static_cast<unsigned long long>(e.bytes));
    if (e.index >= 0) std::fprintf(f, ",\"%s\":%d", e.kind == Kind::allreduce ? "bucket" : "slice", e.index);
    if (e.peer >= 0) std::fprintf(f, ",\"peer\":%d", e.peer);
    std::fputs("}}", f);
  }
}

void send_bytes(const char* p, size_t n, int tag, MPI_Comm c) {
  for (size_t off = 0; off < n; off += kMaxMessage) {
    const int k = static_cast<int>(std::min(kMaxMessage, n - off));
    DT_CHECK_MPI(MPI_Send(p + off, k, MPI_BYTE, 0, tag, c));
  }
}

void recv_bytes(char* p, size_t n, int from, int tag, MPI_Comm c) {
  for (size_t off = 0; off < n; off += kMaxMessage) {
    const int k = static_cast<int>(std::min(kMaxMessage, n - off));
    DT_CHECK_MPI(MPI_Recv(p + off, k, MPI_BYTE, from, tag, c, MPI_STATUS_IGNORE));
  }
}

}  // namespace

size_t timeline_events_per_step(size_t parts, int peers) {
  return 16 + parts * (4 + 2 * static_cast<size_t>(std::max(1, peers)));
}

Timeline::Timeline(const comm::Topology& topo, int64_t first_step, int64_t steps, size_t per_step)
    : topo_(topo), first_step_(first_step), steps_(steps) {
  const size_t want = static_cast<size_t>(std::max<int64_t>(1, steps)) * std::max<size_t>(1, per_step);
  const size_t cap = std::min(want, kMaxEventsPerBuffer);
  main_ = std::make_unique<timeline::Buffer>(cap, first_step, steps);
  if (topo.is_worker()) exchange_ = std::make_unique<timeline::Buffer>(cap, first_step, steps);
  DT_CHECK_MPI(MPI_Comm_dup(topo.world(), &comm_));
  start_ = sync();
}

Timeline::~Timeline() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

// Rank 0 answers every other rank's pings in rank order; each rank keeps its
// round trip with the least time (the tightest bound on the offset). A rank
// waits for its turn under the wait policy (comm/wait.hpp: sleeping where the
// ranks outnumber the cores), so the ranks still waiting do not take the
// cores of the two that measure; the pings themselves spin.
Timeline::Sync Timeline::sync() {
  Sync s;
  int64_t t = 0;
  if (topo_.rank() == 0) {
    for (int r = 1; r < topo_.size(); ++r) {
      DT_CHECK_MPI(MPI_Send(&t, 1, MPI_INT64_T, r, kTagTurn, comm_));
      for (int k = 0; k < kPings; ++k) {
        DT_CHECK_MPI(MPI_Recv(&t, 1, MPI_INT64_T, r, kTagPing, comm_, MPI_STATUS_IGNORE));
        t = timeline::now_ns();
        DT_CHECK_MPI(MPI_Send(&t, 1, MPI_INT64_T, r, kTagPong, comm_));
      }
    }
    s.local_ns = timeline::now_ns();
    return s;
  }
  MPI_Request turn = MPI_REQUEST_NULL;
  DT_CHECK_MPI(MPI_Irecv(&t, 1, MPI_INT64_T, 0, kTagTurn, comm_, &turn));
  comm::wait_request(turn);
  s.rtt_ns = std::numeric_limits<int64_t>::max();
  for (int k = 0; k < kPings; ++k) {
    const int64_t t1 = timeline::now_ns();
    DT_CHECK_MPI(MPI_Send(&t1, 1, MPI_INT64_T, 0, kTagPing, comm_));
    DT_CHECK_MPI(MPI_Recv(&t, 1, MPI_INT64_T, 0, kTagPong, comm_, MPI_STATUS_IGNORE));
    const int64_t t2 = timeline::now_ns();
    if (t2 - t1 < s.rtt_ns) {
      s.rtt_ns = t2 - t1;
      s.local_ns = t1 + (t2 - t1) / 2;
      s.offset_ns = t - s.local_ns;
    }
  }
  return s;
}

void Timeline::write(const std::string& path) {
  const Sync end = sync();
  Header h{};
  h.rank = topo_.rank();
  h.server = topo_.is_server() ? 1 : 0;
  h.node = topo_.is_server() ? -1 : topo_.node();
  h.threads = exchange_ ? 2 : 1;
  h.local0 = start_.local_ns;
  h.offset0 = start_.offset_ns;
  h.rtt0 = start_.rtt_ns;
  h.local1 = end.local_ns;
  h.offset1 = end.offset_ns;
  h.rtt1 = end.rtt_ns;
  h.n_main = main_->size();
  h.n_exchange = exchange_ ? exchange_->size() : 0;
  h.dropped = main_->dropped() + (exchange_ ? exchange_->dropped() : 0);
  h.capacity = main_->capacity();
  int len = 0;
  char name[MPI_MAX_PROCESSOR_NAME];
  MPI_Get_processor_name(name, &len);
  std::snprintf(h.host, sizeof h.host, "%.63s", name);

  const int size = topo_.size();
  std::vector<Header> all(topo_.rank() == 0 ? static_cast<size_t>(size) : 0);
  DT_CHECK_MPI(MPI_Gather(&h, sizeof(Header), MPI_BYTE, all.data(), sizeof(Header), MPI_BYTE, 0, comm_));
  if (topo_.rank() != 0) {
    send_bytes(reinterpret_cast<const char*>(main_->data()), h.n_main * sizeof(timeline::Event), kTagData, comm_);
    if (exchange_)
      send_bytes(reinterpret_cast<const char*>(exchange_->data()), h.n_exchange * sizeof(timeline::Event), kTagData,
                 comm_);
    return;
  }

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) DT_FAIL("option 'timeline': cannot create '", tmp, "': ", std::strerror(errno));
  double err_us = 0;
  uint64_t dropped = 0;
  for (const Header& x : all) {
    err_us = std::max(err_us, static_cast<double>(std::max(x.rtt0, x.rtt1)) / 2000.0);
    dropped += x.dropped;
  }
  // A compute stand-in run says so (issue 16: every output of such a run).
  const std::string stand_in =
      compute_stand_in_ms > 0 ? ",\"compute_stand_in_ms\":" + format::shortest(compute_stand_in_ms) +
                                    ",\"compute_stand_in\":\"an emulation: each worker's compute spans are a "
                                    "stand-in's wait, not a model's forward and backward\""
                              : std::string();
  std::fprintf(f,
               "{\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"producer\":\"dtrain train --timeline\",\"ranks\":%d,"
               "\"first_step\":%lld,\"timeline_steps\":%lld,\"clock\":\"steady clock of each rank mapped onto rank "
               "0's: offsets from the fastest of %d MPI round trips with rank 0 at start and at the end, interpolated "
               "linearly\",\"clock_alignment_error_us\":%.3f,\"dropped_events\":%llu%s},\n\"traceEvents\":[",
               size, static_cast<long long>(first_step_), static_cast<long long>(steps_), kPings, err_us,
               static_cast<unsigned long long>(dropped), stand_in.c_str());
  JsonOut out(f);
  const int64_t origin = start_.local_ns;  // rank 0's first measurement: ts 0
  for (const Header& x : all) write_metadata(out, x);
  std::vector<timeline::Event> buf;
  for (int r = 0; r < size; ++r) {
    const Header& x = all[static_cast<size_t>(r)];
    const timeline::Event* ev_main = main_->data();
    const timeline::Event* ev_exchange = exchange_ ? exchange_->data() : nullptr;
    if (r != 0) {
      buf.resize(x.n_main + x.n_exchange);
      recv_bytes(reinterpret_cast<char*>(buf.data()), x.n_main * sizeof(timeline::Event), r, kTagData, comm_);
      recv_bytes(reinterpret_cast<char*>(buf.data() + x.n_main), x.n_exchange * sizeof(timeline::Event), r, kTagData,
                 comm_);
      ev_main = buf.data();
      ev_exchange = buf.data() + x.n_main;
    }
    write_events(out, x, origin, ev_main, x.n_main, 0);
    write_events(out, x, origin, ev_exchange, x.n_exchange, 1);
  }
  std::fputs("\n]}\n", f);
  const bool ok = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0 && !std::ferror(f);
  const int err = errno;
  std::fclose(f);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = ok ? errno : err;
    std::remove(tmp.c_str());
    DT_FAIL("option 'timeline': cannot write '", path, "': ", std::strerror(e));
  }
}

}  // namespace dtrain::engine
