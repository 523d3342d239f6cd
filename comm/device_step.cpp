// comm/device_step.cpp — one step of the communication thread when the arena
// is on a device (ExchangeOptions::device; see exchange.cpp for the threading).
//
// The arena pointers are device pointers: this file reads and writes them only
// through the intra-node reducer (when it works on the device) and the
// download/upload hooks, and talks MPI from its host staging buffers
// stage_g / stage_p (pinned on CUDA). Ranges are handled in the order backward
// reports them (descending), each as soon as the watermark passes it, so the
// staging copies and the node reduction overlap the rest of backward.
//
// allreduce (bucket grid of exchange.cpp, the same on every worker):
//   reducer on the device (NCCL, or MPI on cpu-staged memory), one node:
//       reducer.allreduce(g[bucket])
//   otherwise:  download g[bucket] → stage_g;  ring allreduce over all
//       workers on stage_g;  upload stage_g → g[bucket]
//
// ps (every worker a sender) and hybrid (the node leader is the sender), the
// ShardMap slices j in descending order of begin, tags from chunked.hpp:
//   sender:  → each server: control message s (tag 0, ps_comm)
//   1. gradients, as slice j gets ready:
//        hybrid, reducer on the device:  reducer.reduce_to_leader(g[j]);
//                                        leader: download g[j] → stage_g[j]
//        hybrid, reducer on the host:    download g[j] → stage_g[j];
//                                        reducer.reduce_to_leader(stage_g[j])
//        ps:                             download g[j] → stage_g[j]
//        sender:  → server(j): stage_g[j]      ← server(j): stage_p[j] (posted)
//   2. parameters, slices in the same order:
//        sender waits for stage_p[j];
//        hybrid, reducer on the device:  leader: upload stage_p[j] → p[j];
//                                        reducer.broadcast_from_leader(p[j])
//        hybrid, reducer on the host:    reducer.broadcast_from_leader(stage_p[j]);
//                                        upload stage_p[j] → p[j]
//        ps:                             upload stage_p[j] → p[j]
// The servers see exactly the host protocol of ps_client.cpp (one
// contribution per sender and slice, same tags), and with the MPI reducer the
// leader's sum is the host hybrid's ((own + member 1) + member 2) + …, so a
// cpu-staged run is bitwise the host run. Side effect: a hybrid leader's
// device gradients hold the node's sum after the step.
#include <cstdlib>

#include "comm/chunked.hpp"
#include "comm/exchange_impl.hpp"
#include "core/error.hpp"

namespace dtrain::comm {

void Exchange::Impl::HostFree::operator()(float* p) const {
  if (p == nullptr) return;
  if (release) release(p);
  else std::free(p);
}

void Exchange::Impl::setup_device() {
  const DeviceArena& d = opts.device;
  DT_CHECK(d.download && d.upload, "a device arena needs the download and upload hooks");
  DT_CHECK(static_cast<bool>(d.host_alloc) == static_cast<bool>(d.host_free),
           "a device arena's host_alloc and host_free come together");
  const bool hybrid = opts.mode == Mode::hybrid;
  const bool one_node_allreduce = opts.mode == Mode::allreduce && topo.num_nodes() == 1;
  if (hybrid || one_node_allreduce) {
    IntraNodeOptions io;
    io.node_comm = topo.node_comm();
    io.max_chunk = chunk;
    io.cuda_device = d.cuda_device;
    io.device_host_addressable = d.host_addressable;
    io.timeout_s = opts.step_timeout_s;
    io.prefer = d.node_reducer;
    reducer = make_intra_node_reducer(io);  // collective over the node
  }
  const bool red_dev = reducer && reducer->on_device();
  bool need_g = false, need_p = false;
  switch (opts.mode) {
    case Mode::allreduce: need_g = !red_dev; break;
    case Mode::ps: need_g = need_p = true; break;
    case Mode::hybrid: need_g = need_p = topo.is_leader() || !red_dev; break;
  }
  const size_t bytes = std::max<size_t>(arena, 1) * sizeof(float);
  auto alloc = [&]() {
    void* p = d.host_alloc ? d.host_alloc(bytes) : std::malloc(bytes);
    DT_CHECK(p != nullptr, "cannot allocate ", bytes, " bytes of host staging memory");
    return std::unique_ptr<float, HostFree>(static_cast<float*>(p), HostFree{d.host_free});
  };
  if (need_g) stage_g = alloc();
  if (need_p) stage_p = alloc();
}

void Exchange::Impl::wait_ready_to(size_t target, size_t& lo, float*& p, float*& g) {
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(mu);
      g = grads;
      p = params;
      if (g != nullptr) lo = ready_lo;
    }
    if (g != nullptr && lo <= target) return;
    wait_ready(g == nullptr ? arena + 1 : lo, -1);  // throws Cancelled on shutdown
  }
}

void Exchange::Impl::run_step_device() {
  if (opts.mode == Mode::allreduce) device_allreduce();
  else device_ps();
}

void Exchange::Impl::device_allreduce() {
  const DeviceArena& d = opts.device;
  const size_t bucket = std::max<size_t>(1, opts.bucket_bytes / sizeof(float));
  const bool in_place = reducer && reducer->on_device();
  size_t bucket_end = arena, lo = arena;
  float *p = nullptr, *g = nullptr;
  while (bucket_end > 0) {
    const size_t target = bucket_end > bucket ? bucket_end - bucket : 0;
    wait_ready_to(target, lo, p, g);
    const size_t n = bucket_end - target;
    if (in_place) {
      reducer->allreduce(g + target, n);
    } else {
      float* h = stage_g.get() + target;
      d.download(g + target, h, n);
      ring->allreduce(h, n);
      d.upload(h, g + target, n);
    }
    bucket_end = target;
  }
}

void Exchange::Impl::device_ps() {
  const DeviceArena& d = opts.device;
  const bool hybrid = opts.mode == Mode::hybrid;
  const bool sender = !hybrid || topo.is_leader();
  const bool red_dev = hybrid && reducer->on_device();
  const auto& slices = map.slices();
  const size_t ns = slices.size();
  int64_t st;
  {
    std::lock_guard<std::mutex> lk(mu);
    st = step;
  }
  float* sg = stage_g.get();
  float* sp = stage_p.get();
  std::vector<MPI_Request> sends;
  std::vector<std::vector<MPI_Request>> recvs(ns);
  if (sender) {
    ctrl_msg = st;
    for (int s = 0; s < topo.num_servers(); ++s) {
      MPI_Request r;
      DT_CHECK_MPI(MPI_Isend(&ctrl_msg, 1, MPI_INT64_T, topo.server_rank(s), detail::kTagControl, ps_comm, &r));
      sends.push_back(r);
    }
  }
  size_t lo = arena;
  float *p = nullptr, *g = nullptr;
  // 1. Gradients, slice by slice as backward reports them.
  for (size_t j = ns; j-- > 0;) {
    const Slice& sl = slices[j];
    wait_ready_to(sl.begin, lo, p, g);
    if (sl.count == 0) continue;
    const size_t b = sl.begin, n = sl.count;
    if (red_dev) {
      reducer->reduce_to_leader(g + b, n);
      if (sender) d.download(g + b, sg + b, n);
    } else {
      d.download(g + b, sg + b, n);
      if (hybrid) reducer->reduce_to_leader(sg + b, n);
    }
    if (sender) {
      const int server = topo.server_rank(sl.server);
      detail::isend_chunked(sg + b, n, server, detail::tag_grad(j, st), ps_comm, chunk, sends);
      detail::irecv_chunked(sp + b, n, server, detail::tag_param(j, st), ps_comm, chunk, recvs[j]);
    }
  }
  // 2. The servers' parameters, in the same order, back onto the device.
  for (size_t j = ns; j-- > 0;) {
    const Slice& sl = slices[j];
    if (sl.count == 0) continue;
    const size_t b = sl.begin, n = sl.count;
    if (sender) detail::wait_all(recvs[j]);
    if (red_dev) {
      if (sender) d.upload(sp + b, p + b, n);
      reducer->broadcast_from_leader(p + b, n);
    } else {
      if (hybrid) reducer->broadcast_from_leader(sp + b, n);
      d.upload(sp + b, p + b, n);
    }
  }
  detail::wait_all(sends);
}

}  // namespace dtrain::comm
