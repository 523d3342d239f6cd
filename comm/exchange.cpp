// comm/exchange.cpp — Exchange: construction, the per-worker communication
// thread, the allreduce mode, and the start-up / evaluation collectives.
//
// Threading (after Horovod's background thread): every worker owns one
// communication thread; MPI must provide MPI_THREAD_MULTIPLE. The caller's
// side of a step only records state under a mutex:
//   begin_step   step number, arena pointers, watermark = arena; wakes the thread
//   grads_ready  adds [b, e) to the ready set; the watermark ready_lo drops
//                while ranges join [ready_lo, arena) (ranges normally arrive
//                exactly descending, but any exact cover is accepted)
//   finish_step  checks the cover is complete, blocks until the thread marks
//                the step done (exposed_s), rethrows the thread's exception
// The thread runs one step per begin_step: run_step_allreduce here, or
// run_step_ps (ps_client.cpp) for ps/hybrid, or run_step_device
// (device_step.cpp) for any mode when the arena is on a device; then signals done.
//
// Allreduce protocol: the arena is cut into buckets on a fixed grid from the
// end, [arena − (k+1)·B, arena − k·B) with B = bucket_bytes / 4 floats, the
// last one ending at 0. The thread waits until the watermark passes a
// bucket's lower edge, then ring-allreduces the bucket in place in the
// gradient arena (ring_allreduce.cpp). The grid is a function of (arena, B)
// only, never of timing or of how grads_ready cut the ranges, so every
// worker runs the same sequence of collectives with the same counts, and the
// sums are bitwise reproducible.
#include "comm/exchange.hpp"

#include <algorithm>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "comm/chunked.hpp"
#include "comm/exchange_impl.hpp"
#include "core/error.hpp"

namespace dtrain::comm {

using Clock = std::chrono::steady_clock;
static double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

Mode parse_mode(const std::string& s) {
  if (s == "allreduce") return Mode::allreduce;
  if (s == "ps") return Mode::ps;
  if (s == "hybrid") return Mode::hybrid;
  DT_USAGE("option 'mode' = '", s, "': expected allreduce, ps or hybrid");
}

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::allreduce: return "allreduce";
    case Mode::ps: return "ps";
    case Mode::hybrid: return "hybrid";
  }
  return "?";
}

// ---------------------------------------------------------------- Impl

Exchange::Impl::Impl(const Topology& t, const ExchangeOptions& o, size_t arena_floats)
    : topo(t), opts(o), arena(arena_floats), chunk(detail::clamp_chunk(o.max_chunk_elems)) {
  int provided = 0;
  DT_CHECK_MPI(MPI_Query_thread(&provided));
  if (provided < MPI_THREAD_MULTIPLE)
    DT_FAIL("the gradient exchange runs a communication thread per worker and needs MPI_THREAD_MULTIPLE, but MPI "
            "was initialised with thread level ", provided, " (initialise with MPI_Init_thread(…, "
            "MPI_THREAD_MULTIPLE, …) and use an MPI library built with thread support)");
  if (o.mode == Mode::allreduce && t.num_servers() > 0)
    DT_USAGE("option 'mode' = allreduce uses no parameter servers, but option 'ps' = ", t.num_servers(),
             " (set ps = 0, or mode = ps / hybrid)");
  if (o.mode != Mode::allreduce && t.num_servers() == 0)
    DT_USAGE("option 'mode' = ", mode_name(o.mode), " needs parameter-server ranks: set option 'ps' ≥ 1");
  if (o.bucket_bytes == 0) DT_USAGE("the allreduce bucket size must be at least 1 byte");
  map = ShardMap(arena, o.mode == Mode::allreduce ? 0 : t.num_servers(), o.max_slice, o.min_slice);

  DT_CHECK_MPI(MPI_Comm_dup(t.world(), &ps_comm));
  int* tag_ub = nullptr;
  int flag = 0;
  DT_CHECK_MPI(MPI_Comm_get_attr(ps_comm, MPI_TAG_UB, &tag_ub, &flag));
  DT_CHECK(!flag || detail::max_tag_for(map.slices().size()) <= static_cast<size_t>(*tag_ub),
           "the shard map has ", map.slices().size(), " slices, more than MPI's tag bound ", *tag_ub,
           " allows: raise max_slice");
  if (t.is_worker()) {
    DT_CHECK_MPI(MPI_Comm_dup(t.workers(), &workers_comm));
    DT_CHECK_MPI(MPI_Comm_dup(t.node_comm(), &node_comm));
    ring = std::make_unique<detail::RingAllreduce>(t.workers(), chunk);
    if (o.device.enabled) setup_device();
    thread = std::thread([this] { thread_main(); });
  }
}

Exchange::Impl::~Impl() {
  if (thread.joinable()) {
    {
      std::lock_guard<std::mutex> lk(mu);
      quit = true;
    }
    cv_work.notify_all();
    thread.join();
  }
  ring.reset();
  reducer.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Comm* c : {&ps_comm, &node_comm, &workers_comm})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

bool Exchange::Impl::is_sender() const {
  if (!topo.is_worker()) return false;
  if (opts.mode == Mode::ps) return true;
  return opts.mode == Mode::hybrid && topo.is_leader();
}

std::vector<int> Exchange::Impl::senders() const {
  std::vector<int> s;
  if (opts.mode == Mode::ps)
    for (int r = 0; r < topo.num_workers(); ++r) s.push_back(r);
  else if (opts.mode == Mode::hybrid)
    for (int n = 0; n < topo.num_nodes(); ++n) s.push_back(topo.leader_rank(n));
  return s;
}

size_t Exchange::Impl::wait_ready(size_t below, double timeout_s) {
  std::unique_lock<std::mutex> lk(mu);
  auto ok = [&] { return quit || (grads != nullptr && ready_lo < below); };
  if (timeout_s < 0) cv_work.wait(lk, ok);
  else cv_work.wait_for(lk, std::chrono::duration<double>(timeout_s), ok);
  if (quit) throw Cancelled{};
  return grads != nullptr ? ready_lo : arena;
}

void Exchange::Impl::thread_main() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu);
      cv_work.wait(lk, [&] { return quit || step_seq != seen; });
      if (quit) break;
      seen = step_seq;
    }
    std::exception_ptr err;
    try {
      run_step();
    } catch (const Cancelled&) {
      break;
    } catch (...) {
      err = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lk(mu);
      error = err;
      step_done = true;
    }
    cv_done.notify_all();
  }
  std::lock_guard<std::mutex> lk(mu);
  exited = true;
  cv_done.notify_all();
}

void Exchange::Impl::run_step() {
  if (opts.device.enabled) run_step_device();
  else if (opts.mode == Mode::allreduce) run_step_allreduce();
  else run_step_ps();
}

void Exchange::Impl::run_step_allreduce() {
  const size_t bucket = std::max<size_t>(1, opts.bucket_bytes / sizeof(float));
  size_t bucket_end = arena, lo = arena;
  float* g = nullptr;
  while (bucket_end > 0) {
    // The next grid edge (see the protocol above): the same on every worker.
    const size_t target = bucket_end > bucket ? bucket_end - bucket : 0;
    while (lo > target) lo = wait_ready(lo, -1);
    {
      std::lock_guard<std::mutex> lk(mu);
      g = grads;
    }
    ring->allreduce(g + target, bucket_end - target);
    bucket_end = target;
  }
}

// ---------------------------------------------------------------- Exchange

Exchange::Exchange(const Topology& topo, const ExchangeOptions& o, size_t arena_floats)
    : impl_(std::make_unique<Impl>(topo, o, arena_floats)) {}

Exchange::~Exchange() {
  if (!impl_ || !impl_->thread.joinable()) return;
  Impl& m = *impl_;
  {
    std::unique_lock<std::mutex> lk(m.mu);
    m.quit = true;
    m.cv_work.notify_all();
    // A thread between steps or waiting for ranges leaves at once. One blocked
    // in MPI (unwinding from an error mid-step, peers gone) may never return:
    // joining would hang the rank, so leave it and its state alive — the top
    // level aborts the job.
    if (!m.cv_done.wait_for(lk, std::chrono::seconds(1), [&] { return m.exited; })) {
      lk.unlock();
      m.thread.detach();
      (void)impl_.release();
      return;
    }
  }
  m.thread.join();
}

Mode Exchange::mode() const { return impl_->opts.mode; }
std::string Exchange::node_reducer() const { return impl_->reducer ? impl_->reducer->name() : ""; }
const ShardMap& Exchange::shard_map() const { return impl_->map; }

void Exchange::broadcast_params(float* params) {
  MPI_Comm c = impl_->ps_comm;
  for (size_t off = 0; off < impl_->arena; off += impl_->chunk) {
    const int n = static_cast<int>(std::min(impl_->chunk, impl_->arena - off));
    DT_CHECK_MPI(MPI_Bcast(params + off, n, MPI_FLOAT, 0, c));
  }
}

void Exchange::begin_step(int64_t step, float* params, float* grads) {
  Impl& m = *impl_;
  DT_CHECK(m.topo.is_worker(), "begin_step on a parameter server (rank ", m.topo.rank(), ")");
  {
    std::lock_guard<std::mutex> lk(m.mu);
    DT_CHECK(!m.broken, "begin_step after a failed step");
    DT_CHECK(!m.stopped, "begin_step after stop()");
    DT_CHECK(!m.in_step, "begin_step(", step, ") while step ", m.step, " is still open (finish_step missing)");
    m.in_step = true;
    m.step_done = false;
    m.step = step;
    m.params = params;
    m.grads = params != nullptr ? grads : nullptr;
    if (params == nullptr || grads == nullptr) m.params = m.grads = nullptr;
    m.ready_lo = m.arena;
    m.pending.clear();
    m.error = nullptr;
    m.any_ready = false;
    ++m.step_seq;
  }
  m.cv_work.notify_all();
}

void Exchange::grads_ready(size_t begin, size_t end) {
  Impl& m = *impl_;
  DT_CHECK(begin <= end && end <= m.arena, "grads_ready [", begin, ", ", end, ") outside the arena of ", m.arena,
           " floats");
  if (begin == end) return;
  bool moved = false;
  {
    std::lock_guard<std::mutex> lk(m.mu);
    DT_CHECK(m.in_step, "grads_ready outside a step (begin_step missing)");
    auto next = m.pending.upper_bound(begin);  // first pending range ending after begin
    DT_CHECK(end <= m.ready_lo && (next == m.pending.end() || next->second >= end), "grads_ready [", begin, ", ",
             end, ") overlaps a range already reported this step");
    if (!m.any_ready) {
      m.any_ready = true;
      m.first_ready = Clock::now();
    }
    m.pending[end] = begin;
    for (auto it = m.pending.find(m.ready_lo); it != m.pending.end(); it = m.pending.find(m.ready_lo)) {
      m.ready_lo = it->second;
      m.pending.erase(it);
      moved = true;
    }
  }
  if (moved) m.cv_work.notify_all();
}

StepTimes Exchange::finish_step(float* params, float* grads) {
  Impl& m = *impl_;
  StepTimes t;
  const Clock::time_point t0 = Clock::now();
  {
    std::unique_lock<std::mutex> lk(m.mu);
    DT_CHECK(m.in_step, "finish_step without begin_step");
    if (m.ready_lo != 0) {
      m.broken = true;
      DT_FAIL("finish_step(", m.step, "): grads_ready did not cover the arena; [0, ", m.ready_lo,
              ") of ", m.arena, " floats was never reported");
    }
    if (m.grads == nullptr) {
      m.params = params;
      m.grads = grads;
    } else {
      DT_CHECK(m.params == params && m.grads == grads, "finish_step: arena pointers differ from begin_step's");
    }
    m.cv_work.notify_all();
    if (m.opts.step_timeout_s > 0) {
      if (!m.cv_done.wait_for(lk, std::chrono::duration<double>(m.opts.step_timeout_s), [&] { return m.step_done; })) {
        m.broken = true;
        // The communication thread is stuck inside MPI with receives posted into
        // the caller's arenas, and it keeps driving MPI's progress: unwinding to
        // the top level would free memory MPI may still write into (seen: a
        // segfault in opal_convertor_unpack on a member rank). End the job here,
        // with the message the top level would have printed.
        const ::dtrain::Error e(::dtrain::detail::where(__FILE__, __LINE__) +
                                ::dtrain::detail::concat("step ", m.step, ": the gradient exchange did not complete within ",
                                                         m.opts.step_timeout_s,
                                                         " s (--comm-timeout): a peer rank stalled or died"));
        std::fprintf(stderr, "dtrain: error: %s\n", e.what());
        std::fflush(stdout);
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, ::dtrain::kExitFailure);
        throw e;  // not reached
      }
    } else {
      m.cv_done.wait(lk, [&] { return m.step_done; });
    }
    m.in_step = false;
    t.exposed_s = seconds_since(t0);
    // The exchange's whole span, one definition for every mode: from the first
    // gradients handed over to the end of this call. finish_step follows the
    // first grads_ready, so busy_s ≥ exposed_s and 1 − exposed/busy is the
    // fraction hidden under backward.
    t.busy_s = m.any_ready ? seconds_since(m.first_ready) : t.exposed_s;
    if (m.error) {
      m.broken = true;
      std::rethrow_exception(m.error);
    }
  }
  return t;
}

void Exchange::stop() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lk(m.mu);
    DT_CHECK(!m.in_step, "stop() inside a step");
    if (m.stopped) return;
    m.stopped = true;
  }
  if (!m.is_sender()) return;
  const int64_t bye = -1;
  for (int s = 0; s < m.topo.num_servers(); ++s)
    DT_CHECK_MPI(MPI_Send(&bye, 1, MPI_INT64_T, m.topo.server_rank(s), detail::kTagControl, m.ps_comm));
}

void Exchange::serve(float* params, const UpdateRule& rule) { impl_->serve(params, rule); }

void Exchange::average_over_workers(float* x, size_t count) {
  Impl& m = *impl_;
  DT_CHECK(m.topo.is_worker(), "average_over_workers on a parameter server");
  DT_CHECK(!m.in_step, "average_over_workers inside a step");
  if (m.topo.num_workers() == 1) return;
  m.ring->allreduce(x, count);
  const float w = static_cast<float>(m.topo.num_workers());
  for (size_t i = 0; i < count; ++i) x[i] /= w;
}

void Exchange::sum_over_workers(double* x, size_t count) {
  Impl& m = *impl_;
  DT_CHECK(m.topo.is_worker(), "sum_over_workers on a parameter server");
  if (m.topo.num_workers() == 1) return;
  for (size_t off = 0; off < count; off += m.chunk) {
    const int n = static_cast<int>(std::min(m.chunk, count - off));
    DT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, x + off, n, MPI_DOUBLE, MPI_SUM, m.workers_comm));
  }
}

}  // namespace dtrain::comm
