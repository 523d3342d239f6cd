// comm/ps_server.cpp — the parameter-server loop: the server half of the
// ps/hybrid protocol, whose one statement (with its determinism argument) is
// at the top of ps_client.cpp; the numbers below are its server steps.
//
// A server owns the ShardMap slices with slice.server == its index. Buffers:
// an arena-sized gradsum left uninitialised (pages of other servers' slices
// are never touched, so never committed), into which the first sender's
// slices are received directly, and one buffer per further sender sized to
// this server's load. The rule sees the whole arena through params/gradsum
// but touches only [begin, end); its optimizer state (momentum) lives on the
// server. The gradients come in pieces (kPsPieceFloats, chunked.hpp) and each
// piece is summed and squared (the check's partial) as soon as it is in,
// while the next ones travel.
//
// When to update (exchange.hpp ServeHooks). Waiting: after the joint check of
// the whole step, the update and the return of the parameters are pipelined
// piece by piece (piece i+1 is updated while piece i travels), but no pull
// overlaps a push. Speculating (ps mode, no clipping): each piece is updated
// and returned as soon as it is summed and finite, so the senders' pulls of
// early pieces overlap their pushes of later ones — with 1 worker and 1
// server the server's receive copies and the worker's pull copies run on
// their two cores at once. Such an update reads the current generation of
// the parameters and rule state and writes the other (`gen`: the caller's
// arenas and this server's, arena-sized and left uninitialised like gsum),
// which the replies are sent from; a step the check keeps makes it current,
// a skipped one leaves the current generation as it was and returns every
// slice again from it after the status (kStatusResend). Pieces after a
// non-finite one wait for the check. Before serve() returns, the current
// values go back to the caller's arenas if they are in this server's.
// The cost per step and byte: the receive, one pass that adds the further
// senders and squares the sum (hidden under the receive but for the last
// piece), the update — out of place while speculating, so it writes the
// parameters and state once, as in place (the copy aside it replaced was a
// further write of both, bench/README.md).
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "comm/chunked.hpp"
#include "comm/exchange_impl.hpp"
#include "core/error.hpp"
#include "core/sum_squares.hpp"
#include "core/timeline.hpp"

namespace dtrain::comm {

namespace {
// Pieces whose receives are posted at a time (see post_order below). 2: one
// being copied in while the last one is summed, updated and sent.
constexpr size_t kRecvWindowPieces = 2;
}  // namespace

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
  std::vector<std::unique_ptr<float[]>> bufs;  // senders 1, 2, … (sender 0 goes straight into gsum)
  for (size_t s = 1; s < nsend; ++s) bufs.emplace_back(new float[load]);
  std::unique_ptr<float[]> gsum(new float[map.total()]);
  const size_t piece = ps_piece(chunk);

  std::vector<int64_t> ctrl(nsend);
  std::vector<MPI_Request> reqs, sends;
  struct Piece {
    size_t k, off, n;  // index into `mine`, offset in the slice, floats
  };
  // The receives of every step, the same each step: each slice here in
  // pieces (ps_piece, as the senders cut their pushes), one request per piece
  // and sender. They are posted in post_order — slices descending (the order
  // backward makes them ready and the senders push them), pieces ascending —
  // a window of kRecvWindowPieces pieces at a time: with every receive posted
  // at once, Open MPI's progress (vader's single-copy get of each piece runs
  // inside it) took in the whole step in one wait before reporting any piece,
  // so nothing could be summed or returned early. A piece sent before its
  // receive is posted waits in MPI's unexpected queue (its rendezvous copy
  // starts when the receive is posted); senders never wait for a server
  // before pushing, so the window cannot deadlock.
  std::vector<Piece> pieces;  // of the step's gradient receives
  std::vector<size_t> owner;  // per receive request, in posting order: index into `pieces`
  std::vector<size_t> first_piece;  // per slice k: its first piece; first_piece[mine.size()]: pieces.size()
  for (size_t k = 0; k < mine.size(); ++k) {
    first_piece.push_back(pieces.size());
    const size_t count = slices[mine[k]].count;
    for (size_t off = 0; off < count; off += piece) pieces.push_back({k, off, std::min(piece, count - off)});
  }
  first_piece.push_back(pieces.size());
  std::vector<size_t> post_order;
  for (size_t k = mine.size(); k-- > 0;)
    for (size_t i = first_piece[k]; i < first_piece[k + 1]; ++i) post_order.push_back(i);
  std::vector<size_t> left(pieces.size());     // per piece: senders' parts not yet in
  std::vector<double> sumsq(pieces.size());    // per piece: its Σ g²
  std::vector<size_t> next_send(mine.size());  // per slice: its first piece not sent yet this step
  std::vector<char> updated;                    // per piece: the rule ran on it this step

  // Speculation (exchange.hpp ServeHooks): two generations of the arenas the
  // rule writes (the parameters, then hooks.state); gen[cur] holds the
  // current values, a step writes gen[1 - cur].
  const bool spec = hooks.speculate && hooks.clip_norm <= 0 && mode == Mode::ps;
  std::vector<float*> gen[2];
  std::vector<std::unique_ptr<float[]>> own_gen;
  int cur = 0;
  if (spec) {
    DT_CHECK(static_cast<bool>(hooks.rule_into), "parameter server ", me,
             ": speculation without an out-of-place rule (ServeHooks::rule_into)");
    gen[0].push_back(params);
    for (float* a : hooks.state) {
      DT_CHECK(a != nullptr, "parameter server ", me, ": a null rule state for speculation");
      gen[0].push_back(a);
    }
    for (size_t a = 0; a < gen[0].size(); ++a) gen[1].push_back(own_gen.emplace_back(new float[map.total()]).get());
  }
  // Before serve() returns: the current values into the caller's arenas.
  auto settle = [&] {
    if (cur == 0) return;
    for (size_t k = 0; k < mine.size(); ++k)
      for (size_t a = 0; a < gen[0].size(); ++a)
        std::copy_n(gen[1][a] + slices[mine[k]].begin, slices[mine[k]].count, gen[0][a] + slices[mine[k]].begin);
    cur = 0;
  };
  int64_t st = 0;
  // The update of [b, b + n) this step: in place, or from gen[cur] into the other.
  auto update = [&](size_t b, size_t n) {
    if (spec)
      hooks.rule_into(gen[cur].data(), gen[1 - cur].data(), gsum.get(), b, b + n, st);
    else
      hooks.rule(params, gsum.get(), b, b + n, st);
  };

  std::vector<int> idx;
  std::vector<double> mine_check(2), all_check(2 * static_cast<size_t>(nservers));
  double status[2] = {0, 0};
  TransferTrace recv_trace, send_trace;  // the timeline's receives and sends of a step
  // Waits for every send posted (completions one by one for the timeline's
  // send events), then starts a new trace of the step's sends.
  timeline::Buffer* tl = nullptr;
  auto wait_sends = [&] {
    if (tl)
      for (int n; (n = detail::wait_some(sends, idx)) != MPI_UNDEFINED;)
        for (int c = 0; c < n; ++c) send_trace.completed(idx[static_cast<size_t>(c)]);
    detail::wait_all(sends);
    send_trace.close_all();
    send_trace.reset(tl, st);
  };
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
    if (ctrl[0] == kCtrlStop || ctrl[0] == kCtrlCheckpoint || ctrl[0] == kCtrlCheckpointStop) settle();
    if (ctrl[0] == kCtrlStop) return ServeEnd::stopped;
    if (ctrl[0] == kCtrlCheckpoint) return ServeEnd::checkpoint;
    if (ctrl[0] == kCtrlCheckpointStop) return ServeEnd::checkpoint_and_stop;
    DT_CHECK(ctrl[0] >= 0, "parameter server ", me, ": unknown control message ", ctrl[0]);
    st = ctrl[0];
    tl = timeline ? timeline->for_step(st) : nullptr;
    timeline::Span step_span(tl, TK::server_step, st);
    recv_trace.reset(tl, st);
    send_trace.reset(tl, st);

    // 2. The step's receives, in post_order, at most kRecvWindowPieces
    //    pieces at a time (posted below as earlier ones complete).
    reqs.clear();
    owner.clear();
    size_t next_post = 0, outstanding = 0;  // into post_order; pieces posted, not complete
    auto post_more = [&] {
      for (; next_post < post_order.size() && outstanding < kRecvWindowPieces; ++next_post, ++outstanding) {
        const size_t id = post_order[next_post];
        const Piece& pc = pieces[id];
        const Slice& sl = slices[mine[pc.k]];
        for (size_t s = 0; s < nsend; ++s) {
          float* into = (s == 0 ? gsum.get() + sl.begin : bufs[s - 1].get() + local_off[pc.k]) + pc.off;
          DT_CHECK_MPI(MPI_Irecv(into, static_cast<int>(pc.n), MPI_FLOAT, from[s], detail::tag_grad(mine[pc.k], st),
                                 ps_comm, &reqs.emplace_back()));
          owner.push_back(id);
          recv_trace.open(TK::server_recv, 1, pc.n * sizeof(float), static_cast<int32_t>(mine[pc.k]), from[s]);
        }
      }
    };
    post_more();
    left.assign(pieces.size(), nsend);

    // 3. Sum each piece as soon as every sender's part is in (gsum holds
    //    sender 0's part; the others are added in sender order, the last
    //    addition fused with the squares), while later pieces still arrive;
    //    note whether it is finite and its Σ g² (sum_squares: a fixed order).
    //    The step's Σ g² adds the pieces' in slice and piece order.
    //    Speculating, a finite piece is then updated into the next
    //    generation, and the slice's pieces go out from it in order as far as
    //    they are updated.
    bool bad = false, any_spec = false;
    // Where this step's replies are read: the next generation while speculating.
    const float* reply = spec ? gen[1 - cur][0] : params;
    updated.assign(pieces.size(), 0);
    for (size_t k = 0; k < mine.size(); ++k) next_send[k] = first_piece[k];
    auto sum_piece = [&](size_t id) {
      const Piece& pc = pieces[id];
      const Slice& sl = slices[mine[pc.k]];
      timeline::Span span(tl, TK::aggregate, st, pc.n * sizeof(float) * nsend, static_cast<int32_t>(mine[pc.k]));
      float* g = gsum.get() + sl.begin + pc.off;
      for (size_t s = 1; s + 1 < nsend; ++s) {
        const float* b = bufs[s - 1].get() + local_off[pc.k] + pc.off;
        for (size_t e = 0; e < pc.n; ++e) g[e] += b[e];
      }
      const double q = nsend > 1 ? add_and_sum_squares(g, bufs[nsend - 2].get() + local_off[pc.k] + pc.off, pc.n)
                                 : sum_squares(g, pc.n);
      if (!std::isfinite(q)) bad = true;  // an Inf or NaN element makes Σ g² non-finite
      sumsq[id] = q;
    };
    // Posts the sends of slice k's pieces from next_send[k] on while ready(piece).
    auto send_in_order = [&](size_t k, auto ready) {
      const size_t end = first_piece[k + 1];
      for (size_t& i = next_send[k]; i < end && ready(i); ++i) {
        const Piece& pc = pieces[i];
        const size_t b = slices[mine[k]].begin + pc.off;
        for (size_t s = 0; s < nsend; ++s) {
          DT_CHECK_MPI(MPI_Isend(reply + b, static_cast<int>(pc.n), MPI_FLOAT, from[s],
                                 detail::tag_param(mine[k], st), ps_comm, &sends.emplace_back()));
          send_trace.open(TK::server_send, 1, pc.n * sizeof(float), static_cast<int32_t>(mine[k]), from[s]);
        }
      }
    };
    auto speculate = [&](size_t id) {
      const Piece& pc = pieces[id];
      {
        timeline::Span span(tl, TK::server_update, st, pc.n * sizeof(float), static_cast<int32_t>(mine[pc.k]));
        update(slices[mine[pc.k]].begin + pc.off, pc.n);
      }
      updated[id] = 1;
      any_spec = true;
      send_in_order(pc.k, [&](size_t i) { return updated[i] != 0; });
    };
    size_t done = 0;
    while (done < pieces.size()) {
      const int count = detail::wait_some(reqs, idx);
      DT_CHECK(count != MPI_UNDEFINED, "parameter server ", me, ": step ", st, " lost track of its receives");
      for (int c = 0; c < count; ++c) {
        recv_trace.completed(idx[static_cast<size_t>(c)]);
        const size_t id = owner[static_cast<size_t>(idx[static_cast<size_t>(c)])];
        if (--left[id] == 0) {
          --outstanding;
          sum_piece(id);
          ++done;
          if (spec && !bad) speculate(id);
        }
      }
      post_more();  // after the sends above: a receive whose message waits may copy it at once
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

    // A skipped step: its generation (if speculating) is dropped; what is
    // left of each slice goes out from the current one, and after the status
    // every slice again if a speculative piece went out.
    bool resend = false;
    if (skip) {
      reply = spec ? gen[cur][0] : params;
      if (any_spec)
        for (size_t k = 0; k < mine.size(); ++k) resend |= next_send[k] > first_piece[k];
    }

    // 5. Update (unless skipped) what is not updated yet and return the rest
    //    of every slice, piece by piece: a piece leaves as soon as it is
    //    updated (every sender receives the slice in the same pieces,
    //    ps_client.cpp).
    for (size_t k = 0; k < mine.size(); ++k) {
      if (next_send[k] == first_piece[k + 1]) continue;
      timeline::Span span(tl, TK::server_update, st, slices[mine[k]].count * sizeof(float),
                          static_cast<int32_t>(mine[k]));
      send_in_order(k, [&](size_t i) {
        if (!skip && !updated[i]) {
          const size_t b = slices[mine[k]].begin + pieces[i].off, n = pieces[i].n;
          if (scale != 1.0f) {
            float* g = gsum.get() + b;
            for (size_t e = 0; e < n; ++e) g[e] *= scale;
          }
          update(b, n);
          updated[i] = 1;
        }
        return true;
      });
    }

    // 6. The step's status, then its replies; after a rolled-back step,
    //    every slice again (the senders post those receives on the flag).
    status[0] = (skip ? kStatusSkipped : 0) + (hooks.signalled && hooks.signalled() ? kStatusSignalled : 0) +
                (resend ? kStatusResend : 0);
    status[1] = norm;
    for (size_t s = 0; s < nsend; ++s) {
      MPI_Request r;
      DT_CHECK_MPI(MPI_Isend(status, 2, MPI_DOUBLE, from[s], detail::tag_extra(ns, detail::ExtraTag::status),
                             ps_comm, &r));
      sends.push_back(r);
      send_trace.untraced(1);
    }
    wait_sends();
    if (resend) {
      for (size_t k = 0; k < mine.size(); ++k) {
        next_send[k] = first_piece[k];
        send_in_order(k, [](size_t) { return true; });
      }
      wait_sends();
    }
    // A step that is not skipped updated every piece into the next generation
    // (speculatively, or in 5.): it becomes current.
    if (spec && !skip) cur = 1 - cur;
  }
}

}  // namespace dtrain::comm
