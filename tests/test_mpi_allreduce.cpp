// tests/test_mpi_allreduce.cpp — the workers' allreduce picked by size
// (comm/allreduce.hpp) and the allreduce step that runs inline
// (exchange.hpp kInlineStepBytes), run at 2, 4 and 5 ranks; sub-communicators
// of every size 1 … world size cover 1 and 3 ranks too.
//
// Recursive doubling must give exactly the sum of its stated order, computed
// here by one rank alone, on every rank; the ring and recursive doubling must
// agree with a double-precision sum to rounding; counts around the crossover
// and the piece size pick the algorithm the table says. An allreduce step
// must give, bit for bit, what its buckets' allreduce calls give — with the
// buckets on both sides of the crossover in one step, inline or on the
// communication thread, with the bucket and arena sizes around every crossover.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "comm/allreduce.hpp"
#include "comm/exchange.hpp"
#include "comm/topology.hpp"
#include "comm/wait.hpp"
#include "mpi_util.hpp"

using namespace dtrain::comm;
using dtrain::test::all_ranks;
using dtrain::test::same_on_all_ranks;
using dtrain::test::same_bits;
using dtrain::test::world_rank;
using dtrain::test::world_size;

namespace {

// Values whose sum depends on the order of addition (magnitudes 1e-3 … 1e2).
float value(int rank, size_t i) {
  const float mag = rank % 3 == 0 ? 1e2f : rank % 3 == 1 ? 1e-3f : 1.0f;
  return mag * std::sin(0.37f * static_cast<float>(i % 9973) + 1.3f * static_cast<float>(rank)) +
         1e-4f * static_cast<float>(rank);
}

// Recursive doubling's stated order (allreduce.hpp) over n ranks, by one rank.
float rd_order(int n, size_t i) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int r = n - p;
  std::vector<float> v(static_cast<size_t>(p));
  for (int k = 0; k < p; ++k) v[static_cast<size_t>(k)] = k < r ? value(2 * k, i) + value(2 * k + 1, i) : value(k + r, i);
  for (int d = 1; d < p; d *= 2)
    for (int k = 0; k < p; ++k)
      if ((k & d) == 0) v[static_cast<size_t>(k)] = v[static_cast<size_t>(k)] + v[static_cast<size_t>(k | d)];
  return v[0];
}

double exact_sum(int n, size_t i) {
  double s = 0;
  for (int k = 0; k < n; ++k) s += value(k, i);
  return s;
}

// The worst |x − exact| / (Σ|values| + tiny) over the range: rounding only.
double worst_error(const std::vector<float>& x, int n) {
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double mag = 0;
    for (int k = 0; k < n; ++k) mag += std::abs(static_cast<double>(value(k, i)));
    worst = std::max(worst, std::abs(x[i] - exact_sum(n, i)) / (mag + 1e-30));
  }
  return worst;
}

std::vector<float> own_values(int rank, size_t count) {
  std::vector<float> x(count);
  for (size_t i = 0; i < count; ++i) x[i] = value(rank, i);
  return x;
}

}  // namespace

TEST_CASE("allreduce by size: recursive doubling gives its stated order on every rank, the ring agrees",
          "[mpi][comm][allreduce]") {
  const int ws = world_size(), wr = world_rank();
  for (int k = 1; k <= ws; ++k) {  // a communicator of the first k ranks
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, wr < k ? 0 : MPI_UNDEFINED, wr, &c);
    bool ok = true;
    if (c != MPI_COMM_NULL) {
      const size_t lat = detail::latency_max_for(k) / sizeof(float);  // the crossover, floats
      const size_t pc = detail::kLatencyPieceFloats;
      for (size_t chunk : {size_t{1000}, (size_t{1} << 31) - 1}) {
        detail::Allreduce ar(c, chunk);
        detail::RingAllreduce ring(c, chunk);
        for (size_t count : {size_t{1}, size_t{2}, pc - 1, pc, pc + 1, 2 * pc + 1, size_t{4097}, lat - 1, lat, lat + 1}) {
          INFO(k << " ranks, count " << count << ", chunk " << chunk);
          const bool small = count <= lat;
          CHECK(ar.algorithm(count) == (small ? detail::AllreduceAlgo::recursive_doubling : detail::AllreduceAlgo::ring));
          std::vector<float> x = own_values(wr, count), y = x;
          ar.allreduce(x.data(), count);
          ring.allreduce(y.data(), count);
          if (small) {  // bit for bit the stated order, computed by this rank alone
            bool exact = true;
            for (size_t i = 0; i < count; ++i) exact = exact && x[i] == rd_order(k, i);
            CHECK(exact);
            ok = ok && exact;
          } else {
            CHECK(std::memcmp(x.data(), y.data(), count * sizeof(float)) == 0);  // the ring itself
            ok = ok && std::memcmp(x.data(), y.data(), count * sizeof(float)) == 0;
          }
          const double ex = worst_error(x, k), ey = worst_error(y, k);
          CHECK(ex < 1e-6);
          CHECK(ey < 1e-6);
          ok = ok && ex < 1e-6 && ey < 1e-6;
          if (k == 2) {  // two ranks: both algorithms add the same two numbers (why latency_max_for(2) may differ)
            const bool same_bits = std::memcmp(x.data(), y.data(), count * sizeof(float)) == 0;
            CHECK(same_bits);
            ok = ok && same_bits;
          }
          if (k == 1) {  // one rank: the values themselves
            CHECK(x == own_values(wr, count));
            ok = ok && x == own_values(wr, count);
          }
          const bool same_x = same_on_all_ranks(x, c), same_y = same_on_all_ranks(y, c);  // collectives: always both
          CHECK(same_x);
          CHECK(same_y);
          ok = ok && same_x && same_y;
        }
      }
      MPI_Comm_free(&c);
    }
    REQUIRE(all_ranks(ok));
  }
}

namespace {

// One allreduce step of `arena` floats through an Exchange (all ranks are
// workers), ranges reported in 3 descending pieces, 2 ms before finish_step;
// returns the summed grads and, in *times, the last step's StepTimes: an
// inline step works only inside finish_step (busy_s == exposed_s), a threaded
// one from the first grads_ready (busy_s ≥ exposed_s + 2 ms).
std::vector<float> exchange_step(const ExchangeOptions& o, size_t arena, int64_t step, StepTimes* times) {
  Topology topo(MPI_COMM_WORLD, {0, 0});
  Exchange ex(topo, o, arena);
  std::vector<float> p(arena, 0.0f), g = own_values(world_rank(), arena);
  for (int64_t s = 0; s <= step; ++s) {  // earlier steps first: the exchange is reused
    g = own_values(world_rank(), arena);
    ex.begin_step(s, p.data(), g.data());
    const size_t a = arena / 3, b = 2 * arena / 3;
    ex.grads_ready(b, arena);
    ex.grads_ready(a, b);
    ex.grads_ready(0, a);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    *times = ex.finish_step(p.data(), g.data());
  }
  ex.stop();
  return g;
}

// What the step must give: each bucket of the grid (exchange.cpp) allreduced
// by detail::Allreduce with the same crossover.
std::vector<float> by_buckets(size_t arena, size_t bucket_bytes, size_t latency_max, size_t* small, size_t* large) {
  detail::Allreduce ar(MPI_COMM_WORLD, (size_t{1} << 31) - 1, latency_max);
  std::vector<float> g = own_values(world_rank(), arena);
  const size_t b = std::max<size_t>(1, bucket_bytes / sizeof(float));
  *small = *large = 0;
  for (size_t end = arena; end > 0;) {
    const size_t begin = end > b ? end - b : 0;
    ++*(ar.algorithm(end - begin) == detail::AllreduceAlgo::recursive_doubling ? small : large);
    ar.allreduce(g.data() + begin, end - begin);
    end = begin;
  }
  return g;
}

// Whether exchange.cpp runs a step of this arena inline (step_inline()).
bool expect_inline(const ExchangeOptions& o, size_t arena) {
  return world_size() == 1 || arena <= std::max(o.bucket_bytes, o.inline_step_bytes) / sizeof(float);
}

}  // namespace

TEST_CASE("allreduce step: small and large buckets in one step, inline or threaded, bitwise the buckets' allreduce",
          "[mpi][comm][allreduce]") {
  const int ws = world_size();
  // 16 KiB buckets, recursive doubling up to 8 KiB: the full buckets take the
  // ring, the last (partial) bucket recursive doubling.
  const size_t arena = 5 * 4096 + 1000;
  ExchangeOptions o;
  o.bucket_bytes = 16 << 10;
  o.latency_max_bytes = 8 << 10;
  size_t small = 0, large = 0;
  const std::vector<float> want = by_buckets(arena, o.bucket_bytes, o.latency_max_bytes, &small, &large);
  REQUIRE(small == 1);
  REQUIRE(large == 5);
  for (size_t inline_bytes : {size_t{0}, size_t{1} << 30}) {  // the thread; inline (the whole step in finish_step)
    INFO("inline_step_bytes " << inline_bytes);
    o.inline_step_bytes = inline_bytes;
    for (size_t chunk : {size_t{1000}, (size_t{1} << 31) - 1}) {
      o.max_chunk_elems = chunk;
      StepTimes t;
      const std::vector<float> got = exchange_step(o, arena, 2, &t);
      CHECK((t.busy_s == t.exposed_s) == expect_inline(o, arena));  // the path taken
      CHECK(same_bits(got, want));
      REQUIRE(all_ranks(same_bits(got, want)));
    }
  }
  REQUIRE(worst_error(want, ws) < 1e-6);
  REQUIRE(same_on_all_ranks(want, MPI_COMM_WORLD));
}

TEST_CASE("allreduce step: bucket and arena sizes around every crossover", "[mpi][comm][allreduce]") {
  const int ws = world_size();
  const size_t lat = detail::latency_max_for(ws);  // the crossover
  struct Case {
    size_t arena, bucket_bytes;
  };
  std::vector<Case> cases;
  // Buckets just below, at and above the algorithm crossover (3 buckets and a bit).
  for (size_t bb : {lat - 4, lat, lat + 4}) cases.push_back({3 * (bb / 4) + 7, bb});
  // Arenas just below, at and above the inline threshold, with buckets smaller than it.
  const size_t inl = kInlineStepBytes / sizeof(float);
  for (size_t a : {inl - 1, inl, inl + 1}) cases.push_back({a, kInlineStepBytes / 4});
  // An arena of one bucket (inline) and of one bucket and one float (two buckets, threaded).
  for (size_t a : {size_t{1} << 18, (size_t{1} << 18) + 1}) cases.push_back({a, size_t{1} << 20});
  for (const Case& c : cases) {
    INFO(ws << " workers, arena " << c.arena << " floats, buckets of " << c.bucket_bytes << " bytes");
    ExchangeOptions o;
    o.bucket_bytes = c.bucket_bytes;
    size_t small = 0, large = 0;
    const std::vector<float> want = by_buckets(c.arena, c.bucket_bytes, lat, &small, &large);
    StepTimes t;
    const std::vector<float> got = exchange_step(o, c.arena, 1, &t);
    const bool path_ok = (t.busy_s == t.exposed_s) == expect_inline(o, c.arena);  // inline exactly when it should
    CHECK(path_ok);
    CHECK(same_bits(got, want));
    const double err = worst_error(got, ws);
    CHECK(err < 1e-6);
    const bool same = same_on_all_ranks(got, MPI_COMM_WORLD);
    REQUIRE(all_ranks(path_ok && same_bits(got, want) && err < 1e-6 && same));
  }
}

TEST_CASE("wait deadline: a wait that outlasts it calls on_expiry; one that completes does not",
          "[mpi][comm][allreduce]") {
  // What bounds an inline step (step_channel.hpp): its waits poll under a
  // WaitDeadline whose expiry ends the job; here on_expiry throws instead.
  struct Expired {};
  for (WaitPolicy policy : {WaitPolicy::spin, WaitPolicy::sleep}) {
    set_wait_policy(policy);
    int buf = 0, expired = 0, tag_ub_flag = 0;
    int* tag_ub = nullptr;
    MPI_Comm_get_attr(MPI_COMM_SELF, MPI_TAG_UB, &tag_ub, &tag_ub_flag);
    MPI_Request never;  // nobody sends this
    MPI_Irecv(&buf, 1, MPI_INT, 0, tag_ub_flag ? *tag_ub : 32767, MPI_COMM_SELF, &never);
    try {
      const detail::WaitDeadline d(0.05, [] { throw Expired{}; });
      detail::wait_one(never);
    } catch (const Expired&) {
      ++expired;
    }
    MPI_Cancel(&never);
    MPI_Wait(&never, MPI_STATUS_IGNORE);
    CHECK(expired == 1);
    // A wait that completes well inside its deadline: no expiry.
    MPI_Request r[2];
    int out = 7;
    MPI_Irecv(&buf, 1, MPI_INT, 0, 5, MPI_COMM_SELF, &r[0]);
    MPI_Isend(&out, 1, MPI_INT, 0, 5, MPI_COMM_SELF, &r[1]);
    std::vector<MPI_Request> reqs(r, r + 2);
    try {
      const detail::WaitDeadline d(5.0, [] { throw Expired{}; });
      detail::wait_all(reqs);
    } catch (const Expired&) {
      ++expired;
    }
    CHECK(expired == 1);
    CHECK(buf == 7);
    set_wait_policy(WaitPolicy::spin);
  }
}

TEST_CASE("live timer: a gap longer than max_gap between two reads restarts the wait, shorter ones count",
          "[mpi][comm][allreduce]") {
  // What keeps a suspended job's --comm-timeout and heartbeat from firing
  // when it is continued (wait.hpp): the time stopped does not count.
  using C = LiveTimer::Clock;
  const C::time_point t0{};
  auto at = [&](double s) { return t0 + std::chrono::duration_cast<C::duration>(std::chrono::duration<double>(s)); };
  LiveTimer t(1.0);
  t.start(at(0));
  CHECK(t.elapsed(at(0.5)) == Approx(0.5));
  CHECK(t.elapsed(at(1.4)) == Approx(1.4));  // reads 0.9 s apart: all of it counts
  CHECK(t.elapsed(at(2.3)) == Approx(2.3));
  CHECK(t.elapsed(at(12.3)) == Approx(0.0));  // 10 s stopped: the wait restarts here
  CHECK(t.elapsed(at(13.0)) == Approx(0.7));
  t.start(at(20));  // a message heard: start again
  CHECK(t.elapsed(at(20.25)) == Approx(0.25));
  // A "forever" timeout (NcclAdapter passes 1e30 s for --comm-timeout 0): its
  // half is capped, not overflowed into a garbage gap.
  LiveTimer forever(0.5e30);
  forever.start(at(0));
  CHECK(forever.elapsed(at(1e6)) == Approx(1e6));
}
