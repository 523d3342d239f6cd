// comm/ps_server.cpp — the parameter-server loop: the server half of the
// ps/hybrid protocol, whose one statement (with its determinism argument) is
// at the top of ps_client.cpp; the numbers below are its server steps.
//
// A server owns the ShardMap slices with slice.server == its index. Buffers:
// one per sender sized to this server's load, and an arena-sized gradsum left
// uninitialised (pages of other servers' slices are never touched, so never
// committed). The rule sees the whole arena through params/gradsum but
// touches only [begin, end); its optimizer state (momentum) lives on the
// server.
#include <memory>

#include "comm/chunked.hpp"
#include "comm/exchange_impl.hpp"
#include "core/error.hpp"

namespace dtrain::comm {

void detail::serve_ps(const Topology& topo, Mode mode, const ShardMap& map, MPI_Comm ps_comm, size_t chunk,
                      float* params, const UpdateRule& rule) {
  DT_CHECK(topo.is_server(), "serve() on a worker (rank ", topo.rank(), ")");
  DT_CHECK(static_cast<bool>(rule), "serve() without an update rule");
  const std::vector<int> from = senders(topo, mode);
  const size_t nsend = from.size();
  const int me = topo.server_index();
  const auto& slices = map.slices();

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
  for (;;) {
    // 1. Control.
    for (size_t s = 0; s < nsend; ++s) {
      MPI_Request r;
      DT_CHECK_MPI(MPI_Irecv(&ctrl[s], 1, MPI_INT64_T, from[s], detail::kTagControl, ps_comm, &r));
      reqs.push_back(r);
    }
    detail::wait_all(reqs);
    size_t stops = 0;
    for (int64_t c : ctrl) stops += c < 0 ? 1 : 0;
    if (stops == nsend) return;
    for (size_t s = 0; s < nsend; ++s)
      if (ctrl[s] != ctrl[0])
        DT_FAIL("parameter server ", me, ": sender rank ", from[s], (ctrl[s] < 0 ? " stopped" : " sent step "),
                (ctrl[s] < 0 ? std::string() : std::to_string(ctrl[s])), " while sender rank ", from[0],
                (ctrl[0] < 0 ? " stopped" : " sent step " + std::to_string(ctrl[0])),
                ": every sender must run the same steps (synchronous training)");
    const int64_t st = ctrl[0];

    // 2. Every receive of the step.
    owner.clear();
    for (size_t k = 0; k < mine.size(); ++k) {
      const Slice& sl = slices[mine[k]];
      left[k] = 0;
      for (size_t s = 0; s < nsend; ++s) {
        detail::irecv_chunked(bufs[s].get() + local_off[k], sl.count, from[s], detail::tag_grad(mine[k], st),
                              ps_comm, chunk, tmp);
        left[k] += tmp.size();
        owner.insert(owner.end(), tmp.size(), k);
        reqs.insert(reqs.end(), tmp.begin(), tmp.end());
        tmp.clear();
      }
    }

    // 3. Sum, update and return each slice as soon as it is complete.
    auto finish_slice = [&](size_t k) {
      const Slice& sl = slices[mine[k]];
      float* g = gsum.get() + sl.begin;
      const float* b0 = bufs[0].get() + local_off[k];
      std::copy(b0, b0 + sl.count, g);
      for (size_t s = 1; s < nsend; ++s) {
        const float* b = bufs[s].get() + local_off[k];
        for (size_t e = 0; e < sl.count; ++e) g[e] += b[e];
      }
      rule(params, gsum.get(), sl.begin, sl.begin + sl.count, st);
      for (size_t s = 0; s < nsend; ++s)
        detail::isend_chunked(params + sl.begin, sl.count, from[s], detail::tag_param(mine[k], st), ps_comm, chunk,
                              sends);
    };
    size_t done = 0;
    for (size_t k = 0; k < mine.size(); ++k)
      if (left[k] == 0) {  // an empty slice
        finish_slice(k);
        ++done;
      }
    while (done < mine.size()) {
      const int count = detail::wait_some(reqs, idx);
      DT_CHECK(count != MPI_UNDEFINED, "parameter server ", me, ": step ", st, " lost track of its receives");
      for (int c = 0; c < count; ++c) {
        const size_t k = owner[static_cast<size_t>(idx[static_cast<size_t>(c)])];
        if (--left[k] == 0) {
          finish_slice(k);
          ++done;
        }
      }
    }
    reqs.clear();

    // 4. The step's replies.
    detail::wait_all(sends);
  }
}

}  // namespace dtrain::comm
