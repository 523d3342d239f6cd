// comm/ps_server.cpp — the parameter-server loop: the server half of the
// ps/hybrid protocol, whose one statement (with its determinism argument) is
// at the top of ps_client.cpp; the numbers below are its server steps.
//
// A server owns the ShardMap slices with slice.server == its index. Buffers:
// one per sender sized to this server's load, and an arena-sized gradsum left
// uninitialised (pages of other servers' slices are never touched, so never
// committed). The rule sees the whole arena through params/gradsum but
// touches only [begin, end); its optimizer state (momentum) lives on the
// server. Updates wait for the joint check of the whole step (exchange.hpp
// ServeHooks): the slices go back once every slice of the step is summed.
#include <cmath>
#include <limits>
#include <memory>

#include "comm/chunked.hpp"
#include "comm/exchange_impl.hpp"
#include "core/error.hpp"
#include "core/timeline.hpp"

namespace dtrain::comm {

ServeEnd detail::serve_ps(const Topology& topo, Mode mode, const ShardMap& map, MPI_Comm ps_comm,
                          MPI_Comm server_comm, size_t chunk, float* params, const ServeHooks& hooks,
                          timeline::Buffer* timeline) {
  using TK = timeline::Kind;
  DT_CHECK(topo.is_server(), "serve() on a worker (rank ", topo.rank(), ")");
  DT_CHECK(static_cast<bool>(hooks.rule), "serve() without an update rule");
  const std::vector<int> from = senders(topo, mode);
  const size_t nsend = from.size();
  const int me = topo.server_index();
  const int nservers = topo.num_servers();
  const auto& slices = map.slices();
  const size_t ns = slices.size();

  std::vector<size_t> mine;        // slice indices owned here
  std::vector<size_t> local_off;   // offset of slice j in a sender buffer
  size_t load = 0;
  for (size_t j = 0; j < slices.size(); ++j)
    if (slices[j].server == me) {
      mine.push_back(j);
      local_off.push_back(load);
      load += slices[j].count;
    }
  std::vector<std::unique_ptr<float[]>> bufs;
  for (size_t s = 0; s < nsend; ++s) bufs.emplace_back(new float[load]);
  std::unique_ptr<float[]> gsum(new float[map.total()]);

  std::vector<int64_t> ctrl(nsend);
  std::vector<MPI_Request> reqs, sends, tmp;
  std::vector<size_t> owner;  // per receive request: index into `mine`
  std::vector<size_t> left(mine.size());
  std::vector<int> idx;
  std::vector<double> mine_check(2), all_check(2 * static_cast<size_t>(nservers));
  double status[2] = {0, 0};
  TransferTrace recv_trace, send_trace;  // the timeline's receives and sends of a step
  for (;;) {
    // 1. Control.
    for (size_t s = 0; s < nsend; ++s) {
      MPI_Request r;
      DT_CHECK_MPI(MPI_Irecv(&ctrl[s], 1, MPI_INT64_T, from[s], detail::kTagControl, ps_comm, &r));
      reqs.push_back(r);
    }
    detail::wait_all(reqs);
    auto what = [](int64_t c) {
      return c == kCtrlStop ? std::string(" stopped")
             : c == kCtrlCheckpoint || c == kCtrlCheckpointStop ? std::string(" asked for a checkpoint")
                                                                : " sent step " + std::to_string(c);
    };
    for (size_t s = 0; s < nsend; ++s)
      if (ctrl[s] != ctrl[0])
        DT_FAIL("parameter server ", me, ": sender rank ", from[s], what(ctrl[s]), " while sender rank ", from[0],
                what(ctrl[0]), ": every sender must run the same steps (synchronous training)");
    if (ctrl[0] == kCtrlStop) return ServeEnd::stopped;
    if (ctrl[0] == kCtrlCheckpoint) return ServeEnd::checkpoint;
    if (ctrl[0] == kCtrlCheckpointStop) return ServeEnd::checkpoint_and_stop;
    DT_CHECK(ctrl[0] >= 0, "parameter server ", me, ": unknown control message ", ctrl[0]);
    const int64_t st = ctrl[0];
    timeline::Buffer* tl = timeline ? timeline->for_step(st) : nullptr;
    timeline::Span step_span(tl, TK::server_step, st);
    recv_trace.reset(tl, st);
    send_trace.reset(tl, st);

    // 2. Every receive of the step.
    owner.clear();
    for (size_t k = 0; k < mine.size(); ++k) {
      const Slice& sl = slices[mine[k]];
      left[k] = 0;
      for (size_t s = 0; s < nsend; ++s) {
        detail::irecv_chunked(bufs[s].get() + local_off[k], sl.count, from[s], detail::tag_grad(mine[k], st),
                              ps_comm, chunk, tmp);
        left[k] += tmp.size();
        recv_trace.open(TK::server_recv, tmp.size(), sl.count * sizeof(float), static_cast<int32_t>(mine[k]), from[s]);
        owner.insert(owner.end(), tmp.size(), k);
        reqs.insert(reqs.end(), tmp.begin(), tmp.end());
        tmp.clear();
      }
    }

    // 3. Sum each slice as soon as it is complete; note whether it is finite
    //    and its Σ g² (double, in element order).
    bool bad = false;
    std::vector<double> sumsq(mine.size(), 0.0);
    auto sum_slice = [&](size_t k) {
      const Slice& sl = slices[mine[k]];
      timeline::Span span(tl, TK::aggregate, st, sl.count * sizeof(float) * nsend, static_cast<int32_t>(mine[k]));
      float* g = gsum.get() + sl.begin;
      const float* b0 = bufs[0].get() + local_off[k];
      std::copy(b0, b0 + sl.count, g);
      for (size_t s = 1; s < nsend; ++s) {
        const float* b = bufs[s].get() + local_off[k];
        for (size_t e = 0; e < sl.count; ++e) g[e] += b[e];
      }
      double q = 0;
      for (size_t e = 0; e < sl.count; ++e) q += static_cast<double>(g[e]) * g[e];
      if (!std::isfinite(q)) bad = true;  // an Inf or NaN element makes Σ g² non-finite
      sumsq[k] = q;
    };
    size_t done = 0;
    for (size_t k = 0; k < mine.size(); ++k)
      if (left[k] == 0) {  // an empty slice
        sum_slice(k);
        ++done;
      }
    while (done < mine.size()) {
      const int count = detail::wait_some(reqs, idx);
      DT_CHECK(count != MPI_UNDEFINED, "parameter server ", me, ": step ", st, " lost track of its receives");
      for (int c = 0; c < count; ++c) {
        recv_trace.completed(idx[static_cast<size_t>(c)]);
        const size_t k = owner[static_cast<size_t>(idx[static_cast<size_t>(c)])];
        if (--left[k] == 0) {
          sum_slice(k);
          ++done;
        }
      }
    }
    reqs.clear();

    // 4. The joint check: every server learns every server's (non-finite?,
    //    Σ g²) and adds them in server order, so all take the same decision
    //    from the same bits.
    mine_check[0] = bad ? 1.0 : 0.0;
    mine_check[1] = 0;
    for (double q : sumsq) mine_check[1] += q;
    if (nservers > 1) {
      timeline::Span span(tl, TK::joint_check, st);
      DT_CHECK_MPI(MPI_Allgather(mine_check.data(), 2, MPI_DOUBLE, all_check.data(), 2, MPI_DOUBLE, server_comm));
    } else {
      all_check[0] = mine_check[0];
      all_check[1] = mine_check[1];
    }
    bool skip = false;
    double total = 0;
    for (int s = 0; s < nservers; ++s) {
      skip |= all_check[2 * static_cast<size_t>(s)] != 0;
      total += all_check[2 * static_cast<size_t>(s) + 1];
    }
    const double norm = skip ? std::numeric_limits<double>::infinity() : std::sqrt(total);
    const float scale = !skip && hooks.clip_norm > 0 && norm > hooks.clip_norm
                            ? static_cast<float>(hooks.clip_norm / norm) : 1.0f;

    // 5. Update (unless skipped) and return every slice.
    for (size_t k = 0; k < mine.size(); ++k) {
      const Slice& sl = slices[mine[k]];
      if (!skip) {
        if (scale != 1.0f) {
          float* g = gsum.get() + sl.begin;
          for (size_t e = 0; e < sl.count; ++e) g[e] *= scale;
        }
        timeline::Span span(tl, TK::server_update, st, sl.count * sizeof(float), static_cast<int32_t>(mine[k]));
        hooks.rule(params, gsum.get(), sl.begin, sl.begin + sl.count, st);
      }
      for (size_t s = 0; s < nsend; ++s) {
        const size_t before = sends.size();
        detail::isend_chunked(params + sl.begin, sl.count, from[s], detail::tag_param(mine[k], st), ps_comm, chunk,
                              sends);
        send_trace.open(TK::server_send, sends.size() - before, sl.count * sizeof(float),
                        static_cast<int32_t>(mine[k]), from[s]);
      }
    }

    // 6. The step's status, then its replies.
    status[0] = (skip ? kStatusSkipped : 0) + (hooks.signalled && hooks.signalled() ? kStatusSignalled : 0);
    status[1] = norm;
    for (size_t s = 0; s < nsend; ++s) {
      MPI_Request r;
      DT_CHECK_MPI(MPI_Isend(status, 2, MPI_DOUBLE, from[s], detail::tag_extra(ns, detail::ExtraTag::status),
                             ps_comm, &r));
      sends.push_back(r);
      send_trace.untraced(1);
    }
    if (tl)  // completions one by one, for the timeline's send events
      for (int n; (n = detail::wait_some(sends, idx)) != MPI_UNDEFINED;)
        for (int c = 0; c < n; ++c) send_trace.completed(idx[static_cast<size_t>(c)]);
    detail::wait_all(sends);
  }
}

}  // namespace dtrain::comm
