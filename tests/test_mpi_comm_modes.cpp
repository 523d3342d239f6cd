// tests/test_mpi_comm_modes.cpp — the three exchange modes on synthetic data
// (run at 2, 4 and 5 ranks). Every worker builds a deterministic "gradient"
// g(rank, step, i), reports it to the Exchange in descending ranges of random
// sizes (a different cut on every rank, step and run, with random pauses),
// and after a few steps of SGD with momentum — on the servers in ps/hybrid,
// locally in allreduce — the parameters must equal a serial computation of
// the same updates with the sum of all workers' gradients, be identical on
// every worker, and be bitwise identical across runs and across chunk limits.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "comm/exchange.hpp"
#include "comm/topology.hpp"
#include "comm/wait.hpp"
#include "core/error.hpp"
#include "mpi_util.hpp"

using namespace dtrain::comm;

namespace {
using dtrain::test::world_rank;
using dtrain::test::world_size;

float grad_of(int rank, int64_t step, size_t i) {
  return 0.01f * std::sin(0.001f * static_cast<float>(i % 100000) + 0.7f * static_cast<float>(rank) +
                          0.3f * static_cast<float>(step));
}
float param0(size_t i) { return std::cos(0.01f * static_cast<float>(i % 10007)); }

// SGD with momentum and weight decay over flat ranges: the rule a server runs.
struct Momentum {
  std::vector<float> v;
  explicit Momentum(size_t n) : v(n, 0.0f) {}
  void operator()(float* p, const float* g, size_t b, size_t e, int64_t) {
    for (size_t i = b; i < e; ++i) {
      v[i] = 0.9f * v[i] + g[i] + 1e-4f * p[i];
      p[i] -= 0.05f * v[i];
    }
  }
  // Out of place (ServeHooks::rule_into): in/out[0] parameters, [1] momentum.
  static void into(const float* const* in, float* const* out, const float* g, size_t b, size_t e, int64_t) {
    for (size_t i = b; i < e; ++i) {
      out[1][i] = 0.9f * in[1][i] + g[i] + 1e-4f * in[0][i];
      out[0][i] = in[0][i] - 0.05f * out[1][i];
    }
  }
};

struct Layout {
  Mode mode;
  int ps, rpn;
};

std::vector<Layout> layouts(int ws) {
  std::vector<Layout> l{{Mode::allreduce, 0, 0}, {Mode::ps, 1, 0}, {Mode::hybrid, 1, 1}, {Mode::hybrid, 1, 0}};
  if (ws >= 3) l.push_back({Mode::ps, 2, 0});
  if ((ws - 1) % 2 == 0) l.push_back({Mode::hybrid, 1, 2});
  if (ws >= 4 && (ws - 2) % 2 == 0) l.push_back({Mode::hybrid, 2, 2});
  return l;
}

struct Run {
  size_t arena = 300000;
  int steps = 3;
  size_t chunk = (size_t{1} << 31) - 1;
  size_t bucket_bytes = size_t{64} << 10;
  unsigned seed = 1;
  bool speculate = true;  // ps servers update before the joint check (comm::ServeHooks)
  // A NaN in world rank nan_rank's gradient at nan_index in step nan_step (-1: none).
  int64_t nan_step = -1;
  int nan_rank = 0;
  size_t nan_index = 0;
};

// What a server's arenas hold when serve() has returned: its parameters and
// momentum, and which elements it owns (ShardMap slices).
struct ServerArenas {
  std::vector<float> p, v;
  std::vector<char> mine;
};

// Returns the final parameters on workers, an empty vector on servers;
// *skipped (if given): per step, whether the step's status said skipped;
// *server (if given, on servers): the server's arenas after serve().
std::vector<float> train(const Layout& l, const Run& run, int* num_workers, std::vector<char>* skipped = nullptr,
                         ServerArenas* server = nullptr) {
  const int r = world_rank();
  Topology topo(MPI_COMM_WORLD, {l.ps, l.rpn});
  *num_workers = topo.num_workers();
  ExchangeOptions o;
  o.mode = l.mode;
  o.max_chunk_elems = run.chunk;
  o.bucket_bytes = run.bucket_bytes;
  Exchange ex(topo, o, run.arena);
  std::vector<float> p(run.arena, r == 0 ? 0.0f : 123.0f), g(run.arena);
  if (r == 0)
    for (size_t i = 0; i < run.arena; ++i) p[i] = param0(i);
  ex.broadcast_params(p.data());
  if (topo.is_server()) {
    Momentum rule(run.arena);
    ServeHooks hooks;
    hooks.rule = std::ref(rule);
    hooks.speculate = run.speculate;
    hooks.state = {rule.v.data()};
    hooks.rule_into = &Momentum::into;
    ex.serve(p.data(), hooks);
    if (server != nullptr) {
      server->mine.assign(run.arena, 0);
      for (const Slice& sl : ex.shard_map().slices())
        if (sl.server == topo.server_index()) std::fill_n(server->mine.begin() + sl.begin, sl.count, 1);
      server->p = p;
      server->v = rule.v;
    }
    return {};
  }
  Momentum local(run.arena);
  std::mt19937_64 rng(run.seed * 1000003u + static_cast<unsigned>(r) * 7919u);
  const size_t max_piece = run.arena / 16 + 1;
  for (int64_t step = 0; step < run.steps; ++step) {
    for (size_t i = 0; i < run.arena; ++i) g[i] = grad_of(r, step, i);
    if (step == run.nan_step && r == run.nan_rank) g[run.nan_index] = std::nanf("");
    // Odd steps give the arena only in finish_step (no overlap, same result).
    if (step % 2 == 0) ex.begin_step(step, p.data(), g.data());
    else ex.begin_step(step);
    for (size_t end = run.arena; end > 0;) {
      const size_t size = 1 + rng() % max_piece, begin = end > size ? end - size : 0;
      ex.grads_ready(begin, end);
      if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
      end = begin;
    }
    const StepTimes t = ex.finish_step(p.data(), g.data());
    REQUIRE(t.exposed_s >= 0);
    REQUIRE(t.busy_s >= t.exposed_s);
    if (skipped) skipped->push_back(t.skipped ? 1 : 0);
    if (l.mode == Mode::allreduce) local(p.data(), g.data(), 0, run.arena, step);
  }
  ex.stop();
  return p;
}

// Serial SGD with momentum from param0 on the gradient sum(step, i); step
// run.nan_step is skipped (no update, momentum unchanged). *mom: the final momentum.
template <class Sum>
std::vector<float> serial_with(const Run& run, Sum sum, std::vector<float>* mom = nullptr) {
  std::vector<float> p(run.arena), g(run.arena);
  for (size_t i = 0; i < run.arena; ++i) p[i] = param0(i);
  Momentum rule(run.arena);
  for (int64_t step = 0; step < run.steps; ++step) {
    if (step == run.nan_step) continue;
    for (size_t i = 0; i < run.arena; ++i) g[i] = sum(step, i);
    rule(p.data(), g.data(), 0, run.arena, step);
  }
  if (mom != nullptr) *mom = rule.v;
  return p;
}

// The exact sum (in double), rounded once.
std::vector<float> serial(const Run& run, int workers) {
  return serial_with(run, [workers](int64_t step, size_t i) {
    double s = 0;
    for (int w = 0; w < workers; ++w) s += grad_of(w, step, i);
    return static_cast<float>(s);
  });
}

// The servers' sums in the protocol's order (ps_client.cpp), in float as the
// exchange takes them: a node's sum ((leader + member 1) + member 2) + … in
// local-rank order (hybrid; ps: every worker is its own node), then the
// server's ((sender 0 + sender 1) + …) in world-rank order. `per`: workers
// per node.
std::vector<float> serial_in_protocol_order(const Run& run, int workers, int per, std::vector<float>* mom = nullptr) {
  return serial_with(run, [workers, per](int64_t step, size_t i) {
    float total = 0;
    for (int leader = 0; leader < workers; leader += per) {
      float node = grad_of(leader, step, i);
      for (int m = leader + 1; m < leader + per; ++m) node += grad_of(m, step, i);
      total = leader == 0 ? node : total + node;
    }
    return total;
  }, mom);
}

// Every worker holds the same bits? (digest compared over the world)
bool same_on_all_workers(const std::vector<float>& p) {
  unsigned long long h = 1469598103934665603ull;
  for (float x : p) {
    uint32_t b;
    std::memcpy(&b, &x, 4);
    h = (h ^ b) * 1099511628211ull;
  }
  if (p.empty()) h = 0;
  std::vector<unsigned long long> all(static_cast<size_t>(world_size()));
  MPI_Allgather(&h, 1, MPI_UNSIGNED_LONG_LONG, all.data(), 1, MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD);
  for (unsigned long long x : all)
    if (x != 0 && x != all[0]) return false;
  return all[0] != 0;
}

using dtrain::test::all_ranks;

// Workers are the first `workers` world ranks (servers the last ones).
bool is_worker(int workers) { return world_rank() < workers; }
// train() gives a worker the whole arena and a server nothing.
bool returns_for_role(const std::vector<float>& p, int workers, size_t arena) {
  return is_worker(workers) ? p.size() == arena : p.empty();
}
// Two runs of layout l: the servers are the last l.ps ranks, each worker
// returned the whole arena from both and each server nothing (a worker with an
// empty result would pass any comparison vacuously).
void require_roles(const Layout& l, int workers, const std::vector<float>& a, const std::vector<float>& b,
                   size_t arena) {
  REQUIRE(all_ranks(workers == world_size() - l.ps));
  REQUIRE(all_ranks(returns_for_role(a, workers, arena) && returns_for_role(b, workers, arena)));
}
}  // namespace

TEST_CASE("exchange modes equal serial SGD on the summed gradients, bitwise reproducibly", "[mpi][comm]") {
  for (const Layout& l : layouts(world_size())) {
    INFO("mode " << mode_name(l.mode) << ", ps " << l.ps << ", ranks-per-node " << l.rpn);
    Run a, b;
    b.seed = 2;       // another cut of the ranges and other pauses,
    b.chunk = 1000;   // and every transfer chunked
    int workers = 0;
    const std::vector<float> pa = train(l, a, &workers);
    const std::vector<float> pb = train(l, b, &workers);
    require_roles(l, workers, pa, pb, a.arena);
    REQUIRE(same_on_all_workers(pa));
    bool ok = true;
    double rel = 0;
    if (is_worker(workers)) {
      const std::vector<float> ref = serial(a, workers);
      double num = 0, den = 0, worst = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        const double d = static_cast<double>(pa[i]) - ref[i];
        num += d * d;
        den += static_cast<double>(ref[i]) * ref[i];
        worst = std::max(worst, std::abs(d) / (std::abs(static_cast<double>(ref[i])) + 1e-2));
      }
      rel = std::sqrt(num / den);
      INFO("relative L2 " << rel << ", worst element " << worst);
      CHECK(rel < 1e-6);
      CHECK(worst < 1e-6);
      ok = rel < 1e-6 && worst < 1e-6 && pa == pb;
      CHECK(pa == pb);
    }
    REQUIRE(all_ranks(ok));
  }
}

TEST_CASE("exchange: a 2,500-float exchange chunked at 1000 is bitwise the unchunked one", "[mpi][comm]") {
  for (const Layout& l : layouts(world_size())) {
    INFO("mode " << mode_name(l.mode) << ", ps " << l.ps << ", ranks-per-node " << l.rpn);
    Run whole, cut;
    whole.arena = cut.arena = 2500;
    cut.chunk = 1000;
    cut.seed = 5;
    int workers = 0;
    const std::vector<float> pw = train(l, whole, &workers);
    const std::vector<float> pc = train(l, cut, &workers);
    require_roles(l, workers, pw, pc, whole.arena);
    bool ok = pw == pc;
    if (is_worker(workers)) {
      const std::vector<float> ref = serial(whole, workers);
      for (size_t i = 0; i < ref.size(); ++i) ok = ok && std::abs(pw[i] - ref[i]) <= 1e-6f * (std::abs(ref[i]) + 1e-2f);
    }
    REQUIRE(all_ranks(ok));
  }
}

TEST_CASE("exchange: sleeping waits give bitwise the spinning result", "[mpi][comm]") {
  for (const Layout& l : layouts(world_size())) {
    INFO("mode " << mode_name(l.mode) << ", ps " << l.ps << ", ranks-per-node " << l.rpn);
    Run spin, sleep;
    sleep.seed = spin.seed;
    int workers = 0;
    dtrain::comm::set_wait_policy(dtrain::comm::WaitPolicy::spin);
    const std::vector<float> a = train(l, spin, &workers);
    dtrain::comm::set_wait_policy(dtrain::comm::WaitPolicy::sleep);
    const std::vector<float> b = train(l, sleep, &workers);
    dtrain::comm::set_wait_policy(dtrain::comm::WaitPolicy::spin);
    require_roles(l, workers, a, b, spin.arena);
    REQUIRE(all_ranks(a == b));
  }
}

TEST_CASE("wait policy: auto sleeps only when ranks × threads exceed the cores; a poll costs little", "[mpi][comm]") {
  using dtrain::comm::WaitPolicy;
  using dtrain::comm::choose_wait_policy;
  CHECK(choose_wait_policy("auto", 2, 1, 2) == WaitPolicy::spin);
  CHECK(choose_wait_policy("auto", 3, 1, 2) == WaitPolicy::sleep);
  CHECK(choose_wait_policy("auto", 4, 8, 32) == WaitPolicy::spin);
  CHECK(choose_wait_policy("auto", 4, 9, 32) == WaitPolicy::sleep);
  CHECK(choose_wait_policy("spin", 64, 8, 2) == WaitPolicy::spin);
  CHECK(choose_wait_policy("sleep", 1, 1, 64) == WaitPolicy::sleep);
  REQUIRE_THROWS_AS(choose_wait_policy("busy", 1, 1, 1), dtrain::UsageError);
  double period = 0;
  // 400 polls (~0.1 s, as the tuner measures): over 20 (~4 ms) the thread's
  // CPU time, which the kernel may account a tick at a time, read 0.52 once
  // in CI's loaded suite.
  const double f = dtrain::comm::measure_poll_cost(400, &period);
  CHECK(period >= dtrain::comm::kSleepMaxS);
  CHECK(f >= 0.0);
  CHECK(f < 0.5);  // a sleeping wait must not behave like a spinning one
}

TEST_CASE("ps and hybrid: bitwise the serial sums in the protocol's order, whatever the chunk and piece cut",
          "[mpi][comm]") {
  for (const Layout& l : layouts(world_size())) {
    if (l.mode == Mode::allreduce) continue;
    INFO("mode " << mode_name(l.mode) << ", ps " << l.ps << ", ranks-per-node " << l.rpn);
    // 300,000 floats: slices of 75,000 (1 server) or 37,500 floats, returned
    // in pieces of 65,536 floats (ps_piece) or, chunked, of 1000.
    Run whole, cut;
    cut.chunk = 1000;
    cut.seed = 3;
    int workers = 0;
    const std::vector<float> pw = train(l, whole, &workers);
    const std::vector<float> pc = train(l, cut, &workers);
    require_roles(l, workers, pw, pc, whole.arena);
    bool ok = true;
    if (is_worker(workers)) {
      const int per = l.mode == Mode::ps ? 1 : l.rpn > 0 ? l.rpn : workers;
      const std::vector<float> want = serial_in_protocol_order(whole, workers, per);
      CHECK(pw == want);
      CHECK(pc == want);
      ok = pw == want && pc == want;
    }
    REQUIRE(all_ranks(ok));
  }
}

TEST_CASE("ps servers' speculation: bitwise the waiting protocol, and a skipped step rolls back parameters and momentum",
          "[mpi][comm]") {
  for (const Layout& l : layouts(world_size())) {
    if (l.mode == Mode::allreduce) continue;  // the engine checks allreduce sums itself
    INFO("mode " << mode_name(l.mode) << ", ps " << l.ps << ", ranks-per-node " << l.rpn);
    // 300,000 floats, slices of 16,384 (64 KiB buckets): a NaN at index 0
    // arrives in the last slice pushed (ranges are reported descending), after
    // the servers returned every other piece updated — the rollback and the
    // second return; at the top index in the first piece, nothing is updated
    // before the check; in the middle, one server may have sent all of its
    // slices and another found the NaN. Step 1 of 4 skipped: steps 2 and 3
    // read the momentum of step 0, so a momentum left updated shows; step 3 of
    // 4 skipped: the gradients do not depend on the parameters, so only a
    // final pull shows a worker left with the speculative parameters. Step 2
    // of 5 skipped: the skip comes when the caller's arenas hold the current
    // generation (after steps 1 and 3, the servers' own arenas do), and four
    // kept steps leave the caller's current at the end (three: the servers'
    // own), so replies and the final values are checked from both generations.
    for (int64_t nan_step : {int64_t{1}, int64_t{2}, int64_t{3}})
    for (size_t at : {size_t{0}, size_t{299999}, size_t{150000}}) {
      for (int chunked = 0; chunked < 2; ++chunked) {
        INFO("NaN at " << at << " in step " << nan_step << (chunked ? ", chunked at 1000" : ""));
        Run spec, wait;
        spec.steps = wait.steps = nan_step == 2 ? 5 : 4;
        spec.nan_step = wait.nan_step = nan_step;
        spec.nan_rank = wait.nan_rank = world_size() - l.ps - 1;  // the last worker
        spec.nan_index = wait.nan_index = at;
        spec.chunk = wait.chunk = chunked ? 1000 : spec.chunk;
        wait.speculate = false;
        wait.seed = 9;
        int workers = 0;
        std::vector<char> sk_spec, sk_wait;
        ServerArenas server;
        const std::vector<float> ps = train(l, spec, &workers, &sk_spec, &server);
        const std::vector<float> pw = train(l, wait, &workers, &sk_wait);
        require_roles(l, workers, ps, pw, spec.arena);
        REQUIRE(same_on_all_workers(ps));
        bool ok = true;
        const int per = l.mode == Mode::ps ? 1 : l.rpn > 0 ? l.rpn : workers;
        std::vector<float> want_v;
        const std::vector<float> want = serial_in_protocol_order(spec, workers, per, &want_v);
        if (!is_worker(workers)) {
          // The server's own arenas hold the final parameters and momentum of
          // its slices when serve() returns, whichever generation held them.
          size_t owned = 0, wrong = 0;
          for (size_t i = 0; i < spec.arena; ++i)
            if (server.mine[i]) {
              ++owned;
              wrong += server.p[i] != want[i] || server.v[i] != want_v[i];
            }
          INFO("server " << world_rank() << ": " << owned << " elements owned, " << wrong << " wrong");
          CHECK(owned > 0);
          CHECK(wrong == 0);
          ok = owned > 0 && wrong == 0;
        }
        if (is_worker(workers)) {
          CHECK(ps == want);
          CHECK(pw == want);
          ok = ps == want && pw == want;
          // Senders learn the skip from the status (in hybrid: the leaders).
          const bool sender = l.mode == Mode::ps || world_rank() % per == 0;
          if (sender) {
            std::vector<char> want_sk(static_cast<size_t>(spec.steps), 0);
            want_sk[static_cast<size_t>(nan_step)] = 1;
            CHECK(sk_spec == want_sk);
            CHECK(sk_wait == want_sk);
            ok = ok && sk_spec == want_sk && sk_wait == want_sk;
          }
        }
        REQUIRE(all_ranks(ok));
      }
    }
  }
}
