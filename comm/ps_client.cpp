// comm/ps_client.cpp — the worker side of the ps and hybrid modes, for host
// and device arenas alike (one step of the communication thread; threading in
// step_channel.hpp), and the one statement of the ps/hybrid protocol; the
// server half is implemented in ps_server.cpp.
//
// Protocol of one step s. ShardMap slices j (shard.hpp), tags from
// chunked.hpp (the step's parity is in the tag, so a fast sender's next step
// never matches this one), every transfer chunked (chunked.hpp). Senders:
// every worker (ps) or every node leader (hybrid), ascending world rank.
// g, p: the arena; G(j), P(j): the staging's host copy of g[j] and the host
// place of p[j] (staging.hpp: g[j], p[j] themselves for a host arena).
//
//   ps, every worker (a sender):
//     → each server:  control message s                       (tag 0, ps_comm)
//     as soon as slice j is completely ready (watermark ≤ begin_j):
//     → server(j):    G(j), in pieces of ps_piece floats   (tag_grad(j, s))
//     ← server(j):    new params into P(j), in pieces of       (tag_param(j, s))
//                     ps_piece floats; then put_params
//
//   hybrid, node reduction by point-to-point on the host (a host arena, or a
//   device arena whose reducer works on host memory):
//     member (local rank > 0):
//       → leader:     G(j) when ready                         (tag_grad(j, s), node)
//       ← leader:     P(j); put_params                        (tag_param(j, s), node)
//     leader (local rank 0, the node's sender):
//       → each server: control message s
//       ← each member: grads[j], all receives posted at step start into one
//                      buffer per member (a member never waits for its leader)
//       when slice j is ready locally and every member's part arrived:
//                      node_sum[j] = ((G(j) + member 1) + member 2) + …
//       → server(j):   node_sum[j] (in pieces);  ← server(j): P(j); put_params
//       → each member: P(j) as soon as it arrived from the server
//
//   hybrid, node reduction on the device (IntraNodeReducer::on_device():
//   NCCL, or MPI on cpu-staged memory), collectives called by every node
//   member in the same order — all reductions, then all broadcasts, slices
//   descending:
//       as slice j gets ready:     reducer.reduce_to_leader(g[j]);
//                                  leader: → server(j): G(j) (the node sum),
//                                  ← server(j): P(j); put_params
//       then, for j descending:    leader waits for P(j);
//                                  reducer.broadcast_from_leader(p[j])
//
//   every sender also receives one status [flags, ‖g‖] from each server
//   (tag_extra(status)) after the step's parameters: skipped, signalled,
//   resend; on resend (ps mode only) it receives that server's slices again,
//   the parameters from before the rolled-back step, into P(j) as above
//   (tag_param(j, s)), and puts them.
//
//   server, for each step (ps_server.cpp):
//     1. receive one control message from every sender: all −1 → return
//        (every sender called stop()); all −2 / −3 → return for a checkpoint
//        (request_checkpoint); all equal s ≥ 0 → step s; anything else →
//        Error (a sender stopped or skipped a step early)
//     2. post the step's gradient receives in the senders' order, a window
//        of kRecvWindowPieces pieces at a time — sender 0's into gradsum
//        itself, one buffer per further sender (with every receive posted at
//        once Open MPI took in the whole step before completing any piece)
//     3. when all senders' parts of a piece of slice j are in:
//          gradsum[piece] = ((sender 0 + sender 1) + sender 2) + …, and its
//          Σ g² (32 lanes in a fixed order); the step's Σ g² adds the pieces'
//          in slice and piece order, whatever order they arrived in.
//          Speculating (ps mode, no clipping; exchange.hpp ServeHooks), while
//          every piece so far is finite: rule_into(the current generation
//          of params and rule state → the next one, gradsum, piece, s), and
//          → every sender: slice j's updated pieces (from the next
//          generation) that follow its last sent one, in order
//     4. the joint check: allgather (non-finite?, Σ g²) over the servers;
//        skip = any non-finite; clip scale from ‖g‖ = √Σ (server order);
//        skip after speculative updates: the next generation is dropped,
//        replies come from the current one
//     5. for each slice j, its pieces not sent yet, in order (ps_piece
//        floats, chunked.hpp): unless skip or already updated,
//        rule(params, gradsum·scale, piece, s) (speculating: rule_into);
//        → every sender: the piece of params[j] (unchanged when skipped;
//        while speculating, from the next generation, or from the current one
//        when skipped), before the next piece is updated
//     6. → every sender: the status; wait for the step's sends; if the step
//        was skipped after a speculative piece was sent (flag resend): →
//        every sender: every slice's params again, in pieces; a step not
//        skipped makes the next generation the current one
//
// Determinism: every sum is taken in a fixed order that does not depend on
// timing — a leader adds its members in local-rank order (the MPI reducer's
// order too), a server its senders in world-rank order — and each slice
// receives exactly one contribution per sender per step. Staging copies move
// bits unchanged, so a cpu-staged device arena gives the host arena's bits in
// every placement of the reducer (NCCL's order is its own, fixed for a fixed
// topology). Parameters of slice j are overwritten only after slice j's
// gradients were reported ready, i.e. after backward stopped reading them.
// Side effect: with the reducer on the device a leader's g holds the node sum
// after the step.
//
// Waiting: the loop polls (MPI_Testsome, then a ≤ 200 µs sleep on the
// channel's condition variable, which grads_ready signals) while backward may
// still report ranges, and blocks in wait_some (comm/wait.hpp) once the whole
// arena is ready.
#include <algorithm>

#include "comm/chunked.hpp"
#include "comm/exchange_impl.hpp"
#include "core/error.hpp"
#include "core/timeline.hpp"

namespace dtrain::comm {

namespace {
enum class Ev { send, member_grad, param };
constexpr double kPollS = 200e-6;
}  // namespace

void Exchange::Impl::run_step_ps(int64_t st) {
  const bool hybrid = opts.mode == Mode::hybrid;
  const bool sender = !hybrid || topo.is_leader();  // talks to the servers
  const bool red_dev = hybrid && reducer_on_device();
  const int members = hybrid && sender && !red_dev ? topo.local_size() - 1 : 0;
  const auto& slices = map.slices();
  const size_t ns = slices.size();
  using TK = timeline::Kind;
  timeline::Buffer* tl = opts.timeline ? opts.timeline->for_step(st) : nullptr;
  trace.reset(tl, st);

  std::vector<MPI_Request> reqs;
  std::vector<std::pair<size_t, Ev>> evs;  // per request: (slice, kind)
  std::vector<MPI_Request> tmp;
  // Moves tmp's requests into reqs; tk: the timeline's name of the transfer
  // (kCount: untraced), of `count` floats to or from world rank `peer`.
  auto track = [&](size_t j, Ev kind, TK tk = TK::kCount, size_t count = 0, int peer = -1) {
    for (MPI_Request r : tmp) {
      reqs.push_back(r);
      evs.emplace_back(j, kind);
    }
    const size_t n = tmp.size();
    tmp.clear();
    if (tk == TK::kCount) trace.untraced(n);
    else trace.open(tk, n, count * sizeof(float), static_cast<int32_t>(j), peer);
    return n;
  };

  status = StepTimes{};
  if (sender) {
    ctrl_msg = st;
    status_in.assign(2 * static_cast<size_t>(topo.num_servers()), 0.0);
    for (int s = 0; s < topo.num_servers(); ++s) {
      MPI_Request r;
      DT_CHECK_MPI(MPI_Isend(&ctrl_msg, 1, MPI_INT64_T, topo.server_rank(s), detail::kTagControl, ps_comm, &r));
      tmp.push_back(r);
      track(0, Ev::send);
      DT_CHECK_MPI(MPI_Irecv(status_in.data() + 2 * s, 2, MPI_DOUBLE, topo.server_rank(s),
                             detail::tag_extra(ns, detail::ExtraTag::status), ps_comm, &r));
      tmp.push_back(r);
      track(0, Ev::send);  // awaited with the sends, at the end of the step
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
        member_left[j] += track(j, Ev::member_grad, TK::member_recv, slices[j].count, node_world[static_cast<size_t>(m) + 1]);
      }
  }

  std::vector<char> uplinked(ns, 0), arrived(ns, 0);
  size_t num_uplinked = 0, params_done = 0;
  size_t next_bcast = ns;  // red_dev: slices [0, next_bcast) still to broadcast
  float* g = nullptr;
  float* p = nullptr;
  // Slice j's parameters are in P(j) on this rank.
  auto params_arrived = [&](size_t j) {
    const Slice& sl = slices[j];
    staging.put_params(p, sl.begin, sl.count);
    for (int m = 0; m < members; ++m) {
      detail::isend_chunked(staging.params(p, sl.begin), sl.count, m + 1, detail::tag_param(j, st), node_comm,
                            chunk, tmp);
      track(j, Ev::send, TK::member_send, sl.count, node_world[static_cast<size_t>(m) + 1]);
    }
    if (red_dev) arrived[j] = 1;  // final after the broadcast
    else ++params_done;
  };
  auto uplink = [&](size_t j) {
    const Slice& sl = slices[j];
    uplinked[j] = 1;
    ++num_uplinked;
    if (red_dev && sl.count > 0) {
      timeline::Span span(tl, TK::node_reduce, st, sl.count * sizeof(float), static_cast<int32_t>(j));
      reducer->reduce_to_leader(g + sl.begin, sl.count);
    }
    if (red_dev && !sender) {
      arrived[j] = 1;  // the leader's broadcast brings them
      return;
    }
    const float* src = staging.grads(g, sl.begin, sl.count);
    if (members > 0) {
      timeline::Span span(tl, TK::node_sum, st, sl.count * sizeof(float) * static_cast<size_t>(members + 1),
                          static_cast<int32_t>(j));
      float* d = node_sum.get() + sl.begin;
      std::copy(src, src + sl.count, d);
      for (int m = 0; m < members; ++m) {
        const float* b = member_bufs[static_cast<size_t>(m)].get() + sl.begin;
        for (size_t e = 0; e < sl.count; ++e) d[e] += b[e];
      }
      src = d;
    }
    const int peer = sender ? topo.server_rank(sl.server) : 0;
    const int peer_world = sender ? peer : node_world[0];
    MPI_Comm comm = sender ? ps_comm : node_comm;
    // To and from a server in pieces (ps_piece: it sums and squares each as it
    // arrives, and returns each as soon as it is updated); to and from the leader whole.
    const size_t cut_at = sender ? detail::ps_piece(chunk) : chunk;
    detail::isend_chunked(src, sl.count, peer, detail::tag_grad(j, st), comm, cut_at, tmp);
    track(j, Ev::send, TK::push, sl.count, peer_world);
    detail::irecv_chunked(staging.params(p, sl.begin), sl.count, peer, detail::tag_param(j, st), comm, cut_at, tmp);
    param_left[j] += track(j, Ev::param, TK::pull, sl.count, peer_world);
    if (param_left[j] == 0) params_arrived(j);  // an empty slice
  };
  // red_dev: the broadcasts, in slice order once every reduction is done.
  auto broadcast = [&]() {
    bool any = false;
    while (red_dev && num_uplinked == ns && next_bcast > 0 && arrived[next_bcast - 1]) {
      const Slice& sl = slices[--next_bcast];
      if (sl.count > 0) {
        timeline::Span span(tl, TK::node_bcast, st, sl.count * sizeof(float), static_cast<int32_t>(next_bcast));
        reducer->broadcast_from_leader(p + sl.begin, sl.count);
      }
      ++params_done;
      any = true;
    }
    return any;
  };

  size_t lo = arena;  // watermark, re-read every round
  std::vector<int> idx;
  while (params_done < ns) {
    // 1. Slices that became sendable, highest first (the order they get ready).
    const detail::StepChannel::View v = channel.view();
    g = v.grads;
    p = v.params;
    lo = v.lo;
    bool progressed = false;
    if (g != nullptr)
      for (size_t j = ns; j-- > 0;)
        if (!uplinked[j] && slices[j].begin >= lo && member_left[j] == 0) {
          uplink(j);
          progressed = true;
        }
    progressed |= broadcast();
    if (params_done == ns) break;
    // 2. Completions: poll while backward may still report ranges, else block.
    idx.resize(reqs.size());
    int count = 0;
    if (lo > 0 || g == nullptr) {
      DT_CHECK_MPI(MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &count, idx.data(), MPI_STATUSES_IGNORE));
      if (count == MPI_UNDEFINED) count = 0;
      if (count == 0 && !progressed) channel.wait_below(lo, kPollS);
    } else {
      count = detail::wait_some(reqs, idx);
      DT_CHECK(count != MPI_UNDEFINED, "ps step ", st, ": nothing left to wait for, yet ", ns - params_done,
               " slice(s) missing");
    }
    for (int c = 0; c < count; ++c) {
      trace.completed(idx[static_cast<size_t>(c)]);
      const auto [j, kind] = evs[static_cast<size_t>(idx[static_cast<size_t>(c)])];
      if (kind == Ev::member_grad) --member_left[j];
      else if (kind == Ev::param && --param_left[j] == 0) params_arrived(j);
    }
  }
  detail::wait_all(reqs);
  trace.close_all();
  if (sender) {  // every server's status of the step (the same decision on each: the joint check)
    std::vector<char> resend(static_cast<size_t>(topo.num_servers()), 0);
    for (int s = 0; s < topo.num_servers(); ++s) {
      const int flags = static_cast<int>(status_in[2 * static_cast<size_t>(s)]);
      status.skipped |= (flags & static_cast<int>(detail::kStatusSkipped)) != 0;
      status.peer_signalled |= (flags & static_cast<int>(detail::kStatusSignalled)) != 0;
      resend[static_cast<size_t>(s)] = (flags & static_cast<int>(detail::kStatusResend)) != 0;
    }
    status.grad_norm = status_in[1];
    // A step rolled back after speculative returns: those servers' slices
    // again, with the parameters from before the step (same tags: every
    // receive of the first round has completed, and MPI does not overtake).
    if (std::find(resend.begin(), resend.end(), 1) != resend.end()) {
      DT_CHECK(!hybrid, "ps step ", st, ": a server returned a rolled-back step in hybrid mode");
      trace.reset(tl, st);
      for (size_t j = 0; j < ns; ++j)
        if (resend[static_cast<size_t>(slices[j].server)]) {
          const int peer = topo.server_rank(slices[j].server);
          detail::irecv_chunked(staging.params(p, slices[j].begin), slices[j].count, peer, detail::tag_param(j, st),
                                ps_comm, detail::ps_piece(chunk), tmp);
          track(j, Ev::param, TK::pull, slices[j].count, peer);
        }
      detail::wait_all(reqs);
      trace.close_all();
      for (size_t j = 0; j < ns; ++j)
        if (resend[static_cast<size_t>(slices[j].server)]) staging.put_params(p, slices[j].begin, slices[j].count);
    }
  }
}

}  // namespace dtrain::comm
