// comm/ps_client.cpp — the worker side of the ps and hybrid modes: one step
// of the communication thread (see exchange.cpp for the threading).
//
// Protocol of one step s, as seen from a worker (ShardMap slices j, in
// descending order of begin, tags from chunked.hpp, every transfer chunked):
//
//   ps, every worker (a "sender"):
//     → each server:  control message s                    (tag 0, ps_comm)
//     as soon as slice j is completely ready (watermark ≤ begin_j):
//     → server(j):    grads[j]                             (tag_grad(j, s))
//     ← server(j):    new params[j], straight into params  (tag_param(j, s))
//
//   hybrid, node member (local rank > 0):
//     → leader:       grads[j] when ready                  (tag_grad(j, s), node)
//     ← leader:       new params[j]                        (tag_param(j, s), node)
//
//   hybrid, node leader (local rank 0, the node's sender):
//     → each server:  control message s
//     ← each member:  grads[j], all receives posted at step start into one
//                     buffer per member
//     when slice j is ready locally and every member's part arrived:
//                     node_sum[j] = ((own + member 1) + member 2) + …
//                     (local-rank order: deterministic)
//     → server(j):    node_sum[j];  ← server(j): params[j]
//     → each member:  params[j] as soon as it arrived from the server
//
// Parameters of slice j are overwritten only after slice j's gradients were
// reported ready, i.e. after backward stopped reading them. The loop polls
// (MPI_Testsome, then a ≤ 200 µs sleep on the condition variable that
// grads_ready signals) while backward may still report ranges, and blocks in
// wait_some (comm/wait.hpp) once the whole arena is ready.
#include <chrono>

#include "comm/chunked.hpp"
#include "comm/exchange_impl.hpp"
#include "core/error.hpp"

namespace dtrain::comm {

namespace {
enum class Ev { send, member_grad, param };
constexpr double kPollS = 200e-6;
}  // namespace

void Exchange::Impl::run_step_ps() {
  const bool hybrid = opts.mode == Mode::hybrid;
  const bool leader = !hybrid || topo.is_leader();  // talks to the servers
  const int members = hybrid && leader ? topo.local_size() - 1 : 0;
  const auto& slices = map.slices();
  const size_t ns = slices.size();
  int64_t st;
  {
    std::lock_guard<std::mutex> lk(mu);
    st = step;
  }

  std::vector<MPI_Request> reqs;
  std::vector<std::pair<size_t, Ev>> evs;  // per request: (slice, kind)
  std::vector<MPI_Request> tmp;
  auto track = [&](size_t j, Ev kind) {
    for (MPI_Request r : tmp) {
      reqs.push_back(r);
      evs.emplace_back(j, kind);
    }
    const size_t n = tmp.size();
    tmp.clear();
    return n;
  };

  if (leader) {
    ctrl_msg = st;
    for (int s = 0; s < topo.num_servers(); ++s) {
      MPI_Request r;
      DT_CHECK_MPI(MPI_Isend(&ctrl_msg, 1, MPI_INT64_T, topo.server_rank(s), detail::kTagControl, ps_comm, &r));
      tmp.push_back(r);
      track(0, Ev::send);
    }
  }
  std::vector<size_t> member_left(ns, 0), param_left(ns, 0);
  if (members > 0) {
    if (member_bufs.empty()) {
      for (int m = 0; m < members; ++m) member_bufs.emplace_back(new float[arena]);
      node_sum.reset(new float[arena]);
    }
    for (int m = 0; m < members; ++m)
      for (size_t j = 0; j < ns; ++j) {
        detail::irecv_chunked(member_bufs[static_cast<size_t>(m)].get() + slices[j].begin, slices[j].count, m + 1,
                              detail::tag_grad(j, st), node_comm, chunk, tmp);
        member_left[j] += track(j, Ev::member_grad);
      }
  }

  std::vector<char> uplinked(ns, 0);
  size_t params_done = 0;
  float* g = nullptr;
  float* p = nullptr;
  auto uplink = [&](size_t j) {
    const Slice& sl = slices[j];
    const float* src = g + sl.begin;
    if (members > 0) {
      float* d = node_sum.get() + sl.begin;
      std::copy(src, src + sl.count, d);
      for (int m = 0; m < members; ++m) {
        const float* b = member_bufs[static_cast<size_t>(m)].get() + sl.begin;
        for (size_t e = 0; e < sl.count; ++e) d[e] += b[e];
      }
      src = d;
    }
    const int peer = leader ? topo.server_rank(sl.server) : 0;
    MPI_Comm comm = leader ? ps_comm : node_comm;
    detail::isend_chunked(src, sl.count, peer, detail::tag_grad(j, st), comm, chunk, tmp);
    track(j, Ev::send);
    detail::irecv_chunked(p + sl.begin, sl.count, peer, detail::tag_param(j, st), comm, chunk, tmp);
    param_left[j] += track(j, Ev::param);
    uplinked[j] = 1;
    if (param_left[j] == 0) ++params_done;  // an empty slice
  };

  size_t lo = arena;  // watermark, re-read every round
  std::vector<int> idx;
  while (params_done < ns) {
    // 1. Slices that became sendable, highest first (the order they get ready).
    {
      std::lock_guard<std::mutex> lk(mu);
      g = grads;
      p = params;
      lo = grads != nullptr ? ready_lo : arena;
    }
    bool progressed = false;
    if (g != nullptr)
      for (size_t j = ns; j-- > 0;)
        if (!uplinked[j] && slices[j].begin >= lo && member_left[j] == 0) {
          uplink(j);
          progressed = true;
        }
    if (params_done == ns) break;
    // 2. Completions: poll while backward may still report ranges, else block.
    idx.resize(reqs.size());
    int count = 0;
    if (lo > 0 || g == nullptr) {
      DT_CHECK_MPI(MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &count, idx.data(), MPI_STATUSES_IGNORE));
      if (count == MPI_UNDEFINED) count = 0;
      if (count == 0 && !progressed) wait_ready(lo, kPollS);
    } else {
      count = detail::wait_some(reqs, idx);
      DT_CHECK(count != MPI_UNDEFINED, "ps step ", st, ": nothing left to wait for, yet ", ns - params_done,
               " slice(s) missing");
    }
    for (int c = 0; c < count; ++c) {
      const auto [j, kind] = evs[static_cast<size_t>(idx[static_cast<size_t>(c)])];
      if (kind == Ev::member_grad) {
        --member_left[j];
      } else if (kind == Ev::param && --param_left[j] == 0) {
        ++params_done;
        for (int m = 0; m < members; ++m) {
          detail::isend_chunked(p + slices[j].begin, slices[j].count, m + 1, detail::tag_param(j, st), node_comm,
                                chunk, tmp);
          track(j, Ev::send);
        }
      }
    }
  }
  detail::wait_all(reqs);
}

}  // namespace dtrain::comm
