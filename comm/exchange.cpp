// comm/exchange.cpp — Exchange: construction, the per-worker communication
// thread (the hand-off with the caller: step_channel.hpp), the allreduce step,
// and the start-up / evaluation collectives. The ps/hybrid step is
// ps_client.cpp, the server loop ps_server.cpp.
//
// Allreduce protocol (the one statement of it): the arena is cut into buckets
// on a fixed grid from the end, [arena − (k+1)·B, arena − k·B) with
// B = bucket_bytes / 4 floats, the last one ending at 0. The thread waits until
// the watermark passes a bucket's lower edge, then sums the bucket over all
// workers in place:
//   reducer on the device (a device arena on one node: NCCL, or MPI on
//   cpu-staged memory):  reducer.allreduce(g[bucket])
//   otherwise:           h = staging.grads(g[bucket]) (a host arena: g itself);
//                        allreduce of h over all workers (allreduce.hpp:
//                        recursive doubling for small buckets, else the ring);
//                        staging.put_grads(h → g[bucket])
// Who runs it: the communication thread, or — a host arena of at most
// max(B, inline_step_bytes), or one worker alone — the caller inside
// finish_step (step_inline()), the same code either way. Every worker takes
// the same decision: it depends on (arena, options, workers) only.
// Determinism: the grid is a function of (arena, B) only, never of timing or
// of how grads_ready cut the ranges, so every worker runs the same sequence of
// collectives with the same counts; each count's algorithm and its sum order
// are fixed (allreduce.hpp), and a one-node MPI reducer runs that same
// allreduce, so the sums are bitwise reproducible and a device arena staged
// through the host gives the host bits.
#include "comm/exchange.hpp"

#include <algorithm>

#include "comm/chunked.hpp"
#include "comm/exchange_impl.hpp"
#include "core/error.hpp"
#include "core/timeline.hpp"

namespace dtrain::comm {

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
    : topo(t),
      opts(o),
      arena(arena_floats),
      chunk(detail::clamp_chunk(o.max_chunk_elems)),
      channel(arena_floats, o.step_timeout_s) {
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
  DT_CHECK(!flag || detail::max_extra_tag_for(map.slices().size()) <= static_cast<size_t>(*tag_ub),
           "the shard map has ", map.slices().size(), " slices, more than MPI's tag bound ", *tag_ub,
           " allows: raise max_slice");
  DT_CHECK_MPI(MPI_Comm_split(t.world(), t.is_server() ? 1 : MPI_UNDEFINED, t.rank(), &server_comm));
  if (t.is_worker()) {
    DT_CHECK_MPI(MPI_Comm_dup(t.workers(), &workers_comm));
    DT_CHECK_MPI(MPI_Comm_dup(t.node_comm(), &node_comm));
    allreduce = std::make_unique<detail::Allreduce>(t.workers(), chunk, o.latency_max_bytes);
    MPI_Group ng, wg;  // node-local rank → world rank (timeline peers)
    DT_CHECK_MPI(MPI_Comm_group(t.node_comm(), &ng));
    DT_CHECK_MPI(MPI_Comm_group(t.world(), &wg));
    std::vector<int> local(static_cast<size_t>(t.local_size()));
    for (size_t i = 0; i < local.size(); ++i) local[i] = static_cast<int>(i);
    node_world.resize(local.size());
    DT_CHECK_MPI(MPI_Group_translate_ranks(ng, t.local_size(), local.data(), wg, node_world.data()));
    MPI_Group_free(&ng);
    MPI_Group_free(&wg);
    if (o.device.enabled) setup_device();
    thread = std::thread([this] { thread_main(); });
  }
}

Exchange::Impl::~Impl() {
  allreduce.reset();
  reducer.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Comm* c : {&ps_comm, &node_comm, &workers_comm, &server_comm})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

void Exchange::Impl::setup_device() {
  const DeviceArena& d = opts.device;
  const bool hybrid = opts.mode == Mode::hybrid;
  if (hybrid || (opts.mode == Mode::allreduce && topo.num_nodes() == 1)) {
    IntraNodeOptions io;
    io.node_comm = topo.node_comm();
    io.max_chunk = chunk;
    io.cuda_device = d.cuda_device;
    io.device_host_addressable = d.host_addressable;
    io.timeout_s = opts.step_timeout_s;
    io.prefer = d.node_reducer;
    io.latency_max_bytes = opts.latency_max_bytes;
    reducer = make_intra_node_reducer(io);  // collective over the node
  }
  // Host copies this rank needs: none of what a reducer on the device keeps there.
  const bool red_dev = reducer_on_device();
  bool need_g = false, need_p = false;
  switch (opts.mode) {
    case Mode::allreduce: need_g = !red_dev; break;
    case Mode::ps: need_g = need_p = true; break;
    case Mode::hybrid: need_g = need_p = topo.is_leader() || !red_dev; break;
  }
  staging = detail::Staging(d, arena, need_g, need_p);
}

std::vector<int> detail::senders(const Topology& topo, Mode mode) {
  std::vector<int> s;
  if (mode == Mode::ps)
    for (int r = 0; r < topo.num_workers(); ++r) s.push_back(r);
  else if (mode == Mode::hybrid)
    for (int n = 0; n < topo.num_nodes(); ++n) s.push_back(topo.leader_rank(n));
  return s;
}

bool detail::is_sender(const Topology& topo, Mode mode) {
  if (!topo.is_worker()) return false;
  if (mode == Mode::ps) return true;
  return mode == Mode::hybrid && topo.is_leader();
}

void Exchange::Impl::thread_main() {
  uint64_t seen = 0;
  while (channel.next_step(seen)) {
    std::exception_ptr err;
    try {
      run_step(channel.step(), nullptr);
    } catch (const detail::StepChannel::Cancelled&) {
      break;
    } catch (...) {
      err = std::current_exception();
    }
    channel.done(err);
  }
  channel.exited();
}

void Exchange::Impl::run_step(int64_t st, float* ready_grads) {
  timeline::Span span(opts.timeline ? opts.timeline->for_step(st) : nullptr, timeline::Kind::exchange_step, st);
  if (opts.mode == Mode::allreduce) run_step_allreduce(st, ready_grads);
  else run_step_ps(st);
}

void Exchange::Impl::run_step_allreduce(int64_t st, float* ready_grads) {
  const size_t bucket = std::max<size_t>(1, opts.bucket_bytes / sizeof(float));
  const bool in_place = reducer_on_device();
  timeline::Buffer* tl = opts.timeline ? opts.timeline->for_step(st) : nullptr;
  size_t bucket_end = arena;
  for (int32_t k = 0; bucket_end > 0; ++k) {
    // The next grid edge (see the protocol above): the same on every worker.
    const size_t target = bucket_end > bucket ? bucket_end - bucket : 0;
    float* g = ready_grads ? ready_grads : channel.wait_to(target).grads;
    const size_t n = bucket_end - target;
    timeline::Span span(tl, timeline::Kind::allreduce, st, n * sizeof(float), k);
    if (in_place) {
      reducer->allreduce(g + target, n);
    } else {
      allreduce->allreduce(staging.grads(g, target, n), n);
      staging.put_grads(g, target, n);
    }
    bucket_end = target;
  }
}

bool Exchange::Impl::step_inline() const {
  if (opts.mode != Mode::allreduce || opts.device.enabled) return false;  // device hooks: the thread's (DeviceArena)
  return topo.num_workers() == 1 || arena <= std::max(opts.bucket_bytes, opts.inline_step_bytes) / sizeof(float);
}

// ---------------------------------------------------------------- Exchange

Exchange::Exchange(const Topology& topo, const ExchangeOptions& o, size_t arena_floats)
    : impl_(std::make_unique<Impl>(topo, o, arena_floats)) {}

Exchange::~Exchange() {
  if (!impl_ || !impl_->thread.joinable()) return;
  // A thread between steps or waiting for ranges leaves at once. One blocked
  // in MPI (unwinding from an error mid-step, peers gone) may never return:
  // joining would hang the rank, so leave it and its state alive — the top
  // level aborts the job.
  if (!impl_->channel.quit(1.0)) {
    impl_->thread.detach();
    (void)impl_.release();
    return;
  }
  impl_->thread.join();
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
  DT_CHECK(impl_->topo.is_worker(), "begin_step on a parameter server (rank ", impl_->topo.rank(), ")");
  impl_->channel.begin(step, params, grads, impl_->step_inline());
}

void Exchange::grads_ready(size_t begin, size_t end) { impl_->channel.ready(begin, end); }

StepTimes Exchange::finish_step(float* params, float* grads) {
  Impl& m = *impl_;
  // An inline step (step_inline) runs in here, the whole arena ready.
  StepTimes t = m.channel.finish(params, grads, [&m](int64_t st, float* g) { m.run_step(st, g); });
  if (impl_->opts.mode != Mode::allreduce) {  // the servers' status, written by the thread before done
    t.skipped = impl_->status.skipped;
    t.peer_signalled = impl_->status.peer_signalled;
    t.grad_norm = impl_->status.grad_norm;
  }
  return t;
}

void Exchange::stop() {
  Impl& m = *impl_;
  if (!m.channel.stop() || !detail::is_sender(m.topo, m.opts.mode)) return;
  const int64_t bye = detail::kCtrlStop;
  for (int s = 0; s < m.topo.num_servers(); ++s)
    DT_CHECK_MPI(MPI_Send(&bye, 1, MPI_INT64_T, m.topo.server_rank(s), detail::kTagControl, m.ps_comm));
}

// The servers' slices travel to world rank 0 with two tags (params, state),
// every slice chunked; rank 0 posts all receives at once.
void Exchange::request_checkpoint(bool and_stop, float* params_out, float* state_out) {
  Impl& m = *impl_;
  DT_CHECK(m.topo.is_worker(), "request_checkpoint on a parameter server (rank ", m.topo.rank(), ")");
  if (m.opts.mode == Mode::allreduce) return;
  DT_CHECK(!m.channel.in_step(), "request_checkpoint inside a step");
  if (and_stop) DT_CHECK(m.channel.stop(), "request_checkpoint(and_stop) after stop()");
  if (detail::is_sender(m.topo, m.opts.mode)) {
    const int64_t c = and_stop ? detail::kCtrlCheckpointStop : detail::kCtrlCheckpoint;
    for (int s = 0; s < m.topo.num_servers(); ++s)
      DT_CHECK_MPI(MPI_Send(&c, 1, MPI_INT64_T, m.topo.server_rank(s), detail::kTagControl, m.ps_comm));
  }
  if (m.topo.rank() != 0) return;
  const size_t ns = m.map.slices().size();
  std::vector<MPI_Request> reqs;
  for (const Slice& sl : m.map.slices()) {
    const int peer = m.topo.server_rank(sl.server);
    detail::irecv_chunked(params_out + sl.begin, sl.count, peer, detail::tag_extra(ns, detail::ExtraTag::ckpt_params),
                          m.ps_comm, m.chunk, reqs);
    detail::irecv_chunked(state_out + sl.begin, sl.count, peer, detail::tag_extra(ns, detail::ExtraTag::ckpt_momentum),
                          m.ps_comm, m.chunk, reqs);
  }
  detail::wait_all(reqs);
}

void Exchange::send_server_state(const float* params, const float* state) {
  Impl& m = *impl_;
  DT_CHECK(m.topo.is_server(), "send_server_state on a worker (rank ", m.topo.rank(), ")");
  const size_t ns = m.map.slices().size();
  std::vector<MPI_Request> reqs;
  for (const Slice& sl : m.map.slices()) {
    if (sl.server != m.topo.server_index()) continue;
    detail::isend_chunked(params + sl.begin, sl.count, 0, detail::tag_extra(ns, detail::ExtraTag::ckpt_params),
                          m.ps_comm, m.chunk, reqs);
    detail::isend_chunked(state + sl.begin, sl.count, 0, detail::tag_extra(ns, detail::ExtraTag::ckpt_momentum),
                          m.ps_comm, m.chunk, reqs);
  }
  detail::wait_all(reqs);
}

ServeEnd Exchange::serve(float* params, const ServeHooks& hooks) {
  Impl& m = *impl_;
  return detail::serve_ps(m.topo, m.opts.mode, m.map, m.ps_comm, m.server_comm, m.chunk, params, hooks, m.opts.timeline);
}

void Exchange::average_over_workers(float* x, size_t count) {
  Impl& m = *impl_;
  DT_CHECK(m.topo.is_worker(), "average_over_workers on a parameter server");
  DT_CHECK(!m.channel.in_step(), "average_over_workers inside a step");
  if (m.topo.num_workers() == 1) return;
  m.allreduce->allreduce(x, count);
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

void Exchange::sum_over_workers_in_step(double* x, size_t count) {
  Impl& m = *impl_;
  DT_CHECK(m.topo.is_worker(), "sum_over_workers_in_step on a parameter server");
  DT_CHECK(count <= m.chunk, "sum_over_workers_in_step: ", count, " doubles, more than one message");
  if (m.topo.num_workers() == 1) return;
  MPI_Request req = MPI_REQUEST_NULL;
  DT_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, x, static_cast<int>(count), MPI_DOUBLE, MPI_SUM, m.workers_comm, &req));
  const detail::WaitDeadline deadline(m.opts.step_timeout_s, [&m] { m.channel.abort_stalled(); });
  detail::wait_one(req);
}

}  // namespace dtrain::comm
