// tests/test_mpi_comm.cpp — comm/ topology, shard map and the collectives of
// Exchange, across real MPI processes (run at 2, 4 and 5 ranks): every layout
// the world size allows, impossible layouts failing identically on every
// rank, the launcher check, and the ShardMap's balance and purity.
#include <mpi.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string>

#include "comm/exchange.hpp"
#include "comm/shard.hpp"
#include "comm/topology.hpp"
#include "core/error.hpp"
#include "mpi_util.hpp"

using namespace dtrain::comm;

namespace {
using dtrain::test::world_rank;
using dtrain::test::world_size;
int comm_size(MPI_Comm c) {
  if (c == MPI_COMM_NULL) return 0;
  int s;
  MPI_Comm_size(c, &s);
  return s;
}
using dtrain::test::all_ranks;
}  // namespace

TEST_CASE("topology: every layout of this world size", "[mpi][comm]") {
  const int ws = world_size(), r = world_rank();
  for (int ps : {-1, 0, 1, 2, ws - 1, ws}) {
    for (int k : {-1, 0, 1, 2, 3}) {
      const int w = ws - ps;
      const bool valid = ps >= 0 && ps < ws && k >= 0 && (k == 0 || w % k == 0);
      INFO("world " << ws << ", ps " << ps << ", ranks-per-node " << k);
      if (!valid) {
        std::string msg;
        try {
          Topology t(MPI_COMM_WORLD, {ps, k});
        } catch (const dtrain::UsageError& e) {
          msg = e.what();
        }
        INFO("message: " << msg);
        const bool named = msg.find(ps < 0 || ps >= ws ? "'ps'" : "'ranks-per-node'") != std::string::npos;
        REQUIRE(all_ranks(named));
        continue;
      }
      Topology t(MPI_COMM_WORLD, {ps, k});
      REQUIRE(t.size() == ws);
      REQUIRE(t.rank() == r);
      REQUIRE(t.num_workers() == w);
      REQUIRE(t.num_servers() == ps);
      REQUIRE(t.is_server() == (r >= w));
      REQUIRE(t.worker_index() == (r < w ? r : -1));
      REQUIRE(t.server_index() == (r < w ? -1 : r - w));
      for (int s = 0; s < ps; ++s) REQUIRE(t.server_rank(s) == w + s);
      // This machine is one shared-memory domain: real nodes = one node.
      const int per = k > 0 ? k : w;
      REQUIRE(t.num_nodes() == w / per);
      for (int n = 0; n < t.num_nodes(); ++n) REQUIRE(t.leader_rank(n) == n * per);
      REQUIRE(t.ranks_on_host() == ws);
      REQUIRE(comm_size(t.workers()) == (t.is_worker() ? w : 0));
      if (t.is_worker()) {
        REQUIRE(t.node() == r / per);
        REQUIRE(t.local_rank() == r % per);
        REQUIRE(t.local_size() == per);
        REQUIRE(t.is_leader() == (r % per == 0));
        REQUIRE(comm_size(t.node_comm()) == per);
        int lr = -1;
        MPI_Comm_rank(t.node_comm(), &lr);
        REQUIRE(lr == t.local_rank());
      } else {
        REQUIRE(t.node() == -1);
        REQUIRE(!t.is_leader());
        REQUIRE(t.node_comm() == MPI_COMM_NULL);
      }
      REQUIRE(comm_size(t.leaders()) == (t.is_leader() ? t.num_nodes() : 0));
      const std::string d = t.describe();
      REQUIRE(d.find(std::to_string(ws) + " rank") == 0);
      REQUIRE(d.find(std::to_string(ps) + (ps == 1 ? " server" : " servers")) != std::string::npos);
    }
  }
}

TEST_CASE("topology: options that differ between ranks fail on every rank", "[mpi][comm]") {
  const int ps = world_rank() == 0 ? 1 : 0;
  bool threw = false;
  try {
    Topology t(MPI_COMM_WORLD, {ps, 0});
  } catch (const dtrain::UsageError& e) {
    threw = std::string(e.what()).find("'ps'") != std::string::npos;
  }
  REQUIRE(all_ranks(threw));
}

TEST_CASE("check_launcher: SLURM_NTASKS must match the world size", "[mpi][comm]") {
  const int ws = world_size();
  const char* old = std::getenv("SLURM_NTASKS");
  const std::string saved = old ? old : "";
  // These ranks were started by mpiexec: hide that for the srun case, then
  // check that under mpirun a different allocation size is accepted.
  const char* ompi = std::getenv("OMPI_COMM_WORLD_SIZE");
  const std::string ompi_saved = ompi ? ompi : "";
  ::setenv("OMPI_COMM_WORLD_SIZE", std::to_string(ws).c_str(), 1);
  ::setenv("SLURM_NTASKS", std::to_string(ws + 5).c_str(), 1);
  REQUIRE_NOTHROW(check_launcher(ws));  // salloc -n N, then mpirun -np ws
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  ::setenv("SLURM_NTASKS", std::to_string(ws).c_str(), 1);
  REQUIRE_NOTHROW(check_launcher(ws));
  ::setenv("SLURM_NTASKS", std::to_string(ws + 3).c_str(), 1);
  std::string msg;
  try {
    check_launcher(ws);
  } catch (const dtrain::UsageError& e) {
    msg = e.what();
  }
  ::unsetenv("SLURM_NTASKS");
  REQUIRE_NOTHROW(check_launcher(ws));
  if (old) ::setenv("SLURM_NTASKS", saved.c_str(), 1);
  if (ompi) ::setenv("OMPI_COMM_WORLD_SIZE", ompi_saved.c_str(), 1);
  INFO(msg);
  REQUIRE(msg.find("SLURM_NTASKS=" + std::to_string(ws + 3)) != std::string::npos);
  REQUIRE(msg.find("singleton") != std::string::npos);
  REQUIRE(msg.find("srun") != std::string::npos);
}

// ---------------------------------------------------------------- ShardMap

namespace {
void check_cover(const ShardMap& m, size_t total, int servers, size_t max_slice, size_t min_slice) {
  INFO("total " << total << ", servers " << servers);
  const auto& sl = m.slices();
  size_t at = 0;
  for (const Slice& s : sl) {
    REQUIRE(s.begin == at);  // ordered, contiguous: disjoint and covering
    REQUIRE(s.count > 0);
    REQUIRE(s.count <= max_slice);
    if (sl.size() > 1) REQUIRE(s.count >= min_slice);
    REQUIRE(s.server >= 0);
    REQUIRE(s.server < servers);
    at += s.count;
  }
  REQUIRE(at == total);
  auto load = m.server_floats();
  REQUIRE(std::accumulate(load.begin(), load.end(), size_t{0}) == total);
}
}  // namespace

TEST_CASE("shard map: AlexNet on 4 servers and ResNet-50 on 3 are balanced within 1.1", "[mpi][comm][shard]") {
  const ShardMap alex(60965224, 4), resnet(25557032, 3);
  check_cover(alex, 60965224, 4, size_t{1} << 20, size_t{1} << 14);
  check_cover(resnet, 25557032, 3, size_t{1} << 20, size_t{1} << 14);
  INFO("alexnet " << alex.imbalance() << ", resnet50 " << resnet.imbalance());
  REQUIRE(alex.imbalance() <= 1.1);
  REQUIRE(resnet.imbalance() <= 1.1);
  // The bound is real: a single whole-arena slice would not meet it.
  REQUIRE(ShardMap(25557032, 3, size_t{1} << 26, size_t{1} << 26).imbalance() > 1.1);
}

TEST_CASE("shard map: cover, bounds and balance over many sizes", "[mpi][comm][shard]") {
  const size_t mx = size_t{1} << 20, mn = size_t{1} << 14;
  for (size_t total : {size_t{1}, size_t{100}, size_t{16383}, size_t{16384}, size_t{61706}, size_t{300000},
                       size_t{1000003}, size_t{25557032}, size_t{60965224}})
    for (int s = 1; s <= 8; ++s) {
      const ShardMap m(total, s);
      check_cover(m, total, s, mx, mn);
      if (total >= static_cast<size_t>(s) * mn) {
        auto load = m.server_floats();
        INFO("total " << total << ", servers " << s);
        REQUIRE(*std::min_element(load.begin(), load.end()) > 0);  // every server has work
        REQUIRE(m.imbalance() <= 1.1);
      }
    }
  // 61,706 floats (LeNet-5) on 2 servers: both get work.
  const ShardMap lenet(61706, 2);
  REQUIRE(lenet.server_floats()[0] > 0);
  REQUIRE(lenet.server_floats()[1] > 0);
  // Small custom bounds and no servers.
  check_cover(ShardMap(2500, 3, 700, 100), 2500, 3, 700, 100);
  REQUIRE(ShardMap(1000, 0).slices().empty());
}

TEST_CASE("shard map: a pure function, identical on every rank", "[mpi][comm][shard]") {
  const ShardMap a(60965224, 4), b(60965224, 4);
  REQUIRE(a.slices().size() == b.slices().size());
  for (size_t i = 0; i < a.slices().size(); ++i) {
    REQUIRE(a.slices()[i].begin == b.slices()[i].begin);
    REQUIRE(a.slices()[i].count == b.slices()[i].count);
    REQUIRE(a.slices()[i].server == b.slices()[i].server);
  }
  // Same map in every process: compare a digest with rank 0's.
  unsigned long long h = 1469598103934665603ull;
  const ShardMap mine(25557032, world_size());
  for (const Slice& s : mine.slices())
    for (unsigned long long v : {s.begin, s.count, static_cast<size_t>(s.server)}) h = (h ^ v) * 1099511628211ull;
  unsigned long long root = h;
  MPI_Bcast(&root, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  REQUIRE(root == h);
}

// ---------------------------------------------------------------- collectives

TEST_CASE("exchange: broadcast, average and sum over workers", "[mpi][comm]") {
  const int ws = world_size(), r = world_rank();
  for (int ps : {0, 1}) {
    if (ps >= ws) continue;
    Topology topo(MPI_COMM_WORLD, {ps, 0});
    ExchangeOptions o;
    o.mode = ps == 0 ? Mode::allreduce : Mode::ps;
    o.max_chunk_elems = 1000;  // every collective below is chunked
    const size_t n = 2500;
    Exchange ex(topo, o, n);
    std::vector<float> p(n);
    for (size_t i = 0; i < n; ++i) p[i] = r == 0 ? static_cast<float>(i) * 0.5f : -1.0f;
    ex.broadcast_params(p.data());
    bool ok = true;
    for (size_t i = 0; i < n; ++i) ok = ok && p[i] == static_cast<float>(i) * 0.5f;
    REQUIRE(all_ranks(ok));
    if (topo.is_worker()) {
      const int w = topo.num_workers();
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(r + 1) * 0.25f + static_cast<float>(i % 7);
      ex.average_over_workers(x.data(), n);
      const float mean_r1 = static_cast<float>(w + 1) / 2.0f * 0.25f;  // mean of (r+1)/4 over workers
      double worst = 0;
      for (size_t i = 0; i < n; ++i)
        worst = std::max(worst, std::abs(static_cast<double>(x[i]) - (mean_r1 + static_cast<double>(i % 7))));
      REQUIRE(worst < 1e-5);
      std::vector<double> c(n);
      for (size_t i = 0; i < n; ++i) c[i] = static_cast<double>(r) + static_cast<double>(i);
      ex.sum_over_workers(c.data(), n);
      const double rs = static_cast<double>(w) * (w - 1) / 2.0;
      bool exact = true;
      for (size_t i = 0; i < n; ++i) exact = exact && c[i] == rs + static_cast<double>(w) * static_cast<double>(i);
      REQUIRE(exact);
      ex.stop();
    } else {
      ex.serve(p.data(), [](float*, const float*, size_t, size_t, int64_t) {});
    }
  }
}

TEST_CASE("exchange: mode names and impossible mode layouts", "[mpi][comm]") {
  REQUIRE(parse_mode("hybrid") == Mode::hybrid);
  REQUIRE(std::string(mode_name(Mode::ps)) == "ps");
  REQUIRE_THROWS_AS(parse_mode("ring"), dtrain::UsageError);
  Topology topo(MPI_COMM_WORLD, {0, 0});
  ExchangeOptions o;
  o.mode = Mode::ps;
  bool threw = false;
  try {
    Exchange ex(topo, o, 100);
  } catch (const dtrain::UsageError& e) {
    threw = std::string(e.what()).find("'ps'") != std::string::npos;
  }
  REQUIRE(all_ranks(threw));
}

TEST_CASE("exchange: misuse of the step protocol is a clear error, not a hang", "[mpi][comm]") {
  Topology topo(MPI_COMM_WORLD, {0, 0});
  ExchangeOptions o;  // 1 MiB buckets: a 1000-float arena is one bucket, no traffic below
  const size_t n = 1000;
  std::vector<float> p(n), g(n);
  std::string overlap, missing;
  {
    Exchange ex(topo, o, n);
    ex.begin_step(0, p.data(), g.data());
    ex.grads_ready(500, 1000);
    try {
      ex.grads_ready(400, 600);
    } catch (const dtrain::Error& e) {
      overlap = e.what();
    }
    try {
      ex.finish_step(p.data(), g.data());
    } catch (const dtrain::Error& e) {
      missing = e.what();
    }
  }  // the destructor stops the communication thread that still waits for [0, 500)
  INFO(overlap << "\n" << missing);
  REQUIRE(overlap.find("overlaps") != std::string::npos);
  REQUIRE(missing.find("[0, 500)") != std::string::npos);
}
