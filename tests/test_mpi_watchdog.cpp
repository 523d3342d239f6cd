// tests/test_mpi_watchdog.cpp — comm/watchdog across real MPI processes (2, 4
// and 5 ranks): the ring's neighbours and names, a bad timeout refused, and no
// false alarm while ranks compute without MPI calls or leave at different times
// (a false alarm would MPI_Abort this binary, failing the ctest entry).
#include <mpi.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "comm/topology.hpp"
#include "comm/watchdog.hpp"
#include "core/error.hpp"
#include "mpi_util.hpp"

using namespace dtrain::comm;

namespace {
using dtrain::test::world_rank;
using dtrain::test::world_size;
using Clock = std::chrono::steady_clock;
}  // namespace

TEST_CASE("watchdog: roles name workers and servers", "[mpi][comm]") {
  Topology topo(MPI_COMM_WORLD, {1, 0});  // the last rank serves
  const int r = world_rank(), n = world_size();
  CHECK(role_name(topo) == (r == n - 1 ? std::string("parameter server 0") : "worker " + std::to_string(r)));
}

TEST_CASE("watchdog: a timeout not above the period is refused on every rank", "[mpi][comm]") {
  WatchdogOptions o;
  o.timeout_s = o.period_s;
  REQUIRE_THROWS_AS(Watchdog(MPI_COMM_WORLD, "worker", o), dtrain::UsageError);
  o.timeout_s = 0;
  REQUIRE_THROWS_WITH(Watchdog(MPI_COMM_WORLD, "worker", o), Catch::Contains("heartbeat-timeout"));
}

TEST_CASE("watchdog: busy ranks and ranks leaving at different times raise no false alarm", "[mpi][comm]") {
  const int r = world_rank(), n = world_size();
  WatchdogOptions o;
  o.period_s = 0.5;
  o.timeout_s = 2;
  const auto t0 = Clock::now();
  auto dog = std::make_unique<Watchdog>(MPI_COMM_WORLD, "rank-" + std::to_string(r), o);
  CHECK(dog->watched_rank() == (r + n - 1) % n);
  CHECK(dog->watched_name() == "rank-" + std::to_string((r + n - 1) % n) + " on " + dtrain::error_host());
  // Compute without any MPI call, moving steps, then leave: rank 0 at once,
  // the others 3 s later (longer than the timeout). Rank 1 must not blame
  // rank 0 for its silence after it left; the others watch ranks that compute.
  const int leave_ms = r == 0 ? 500 : 3500;
  volatile double sink = 0;
  for (int64_t step = 0; Clock::now() - t0 < std::chrono::milliseconds(leave_ms); ++step) {
    dog->set_step(step);
    for (int i = 0; i < 100000; ++i) sink = sink + 1e-9 * i;
  }
  const auto leave = Clock::now();
  dog.reset();  // bounded even though the neighbours are gone
  CHECK(std::chrono::duration<double>(Clock::now() - leave).count() < 2.5);
  MPI_Barrier(MPI_COMM_WORLD);
  // Every rank is still here: none was aborted by a false alarm.
  int alive = 1, all = 0;
  MPI_Allreduce(&alive, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  REQUIRE(all == n);
}
