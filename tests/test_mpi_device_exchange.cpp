// tests/test_mpi_device_exchange.cpp — the exchange's device path and the MPI
// intra-node reducer, without a GPU (run at 2, 4 and 5 ranks).
//
// Reducer: reduce_to_leader equals the sum a single rank computes in local-rank
// order, bit for bit; broadcast copies the leader's bits; allreduce gives the
// workers' allreduce's bits (allreduce.hpp) on every rank — on real and on
// virtual nodes, with chunking.
// Exchange: the arena lives in a fake device (separate vectors reached only
// through the download/upload hooks, staging buffers from a host_alloc that
// fills them with NaN) and every layout of test_mpi_comm_modes.cpp, with the
// MPI reducer both in place on the "device" and on host staging buffers, must
// give exactly the parameters of the host-arena exchange.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include "comm/exchange.hpp"
#include "comm/intra_node.hpp"
#include "comm/allreduce.hpp"
#include "comm/topology.hpp"
#include "core/error.hpp"
#include "mpi_util.hpp"

using namespace dtrain::comm;

namespace {
using dtrain::test::same_bits;
using dtrain::test::world_rank;
using dtrain::test::world_size;

float value(int rank, int64_t step, size_t i) {
  return 0.01f * std::sin(0.0013f * static_cast<float>(i % 50000) + 0.9f * static_cast<float>(rank) +
                          0.37f * static_cast<float>(step)) + 1e-3f * static_cast<float>(rank);
}

using dtrain::test::all_ranks;

}  // namespace

TEST_CASE("intra-node reducer (mpi): the 1-rank sum in local-rank order, bitwise; broadcast; allreduce = workers' allreduce",
          "[mpi][comm][device]") {
  const int ws = world_size();
  std::vector<int> rpns{0};
  if (ws % 2 == 0) rpns.push_back(2);
  for (int rpn : rpns)
    for (size_t chunk : {size_t{1000}, (size_t{1} << 31) - 1}) {
      INFO("ranks-per-node " << rpn << ", chunk " << chunk);
      Topology topo(MPI_COMM_WORLD, {0, rpn});
      IntraNodeOptions o;
      o.node_comm = topo.node_comm();
      o.max_chunk = chunk;
      o.device_host_addressable = true;
      auto red = make_intra_node_reducer(o);
      REQUIRE(std::string(red->name()) == "mpi");
      CHECK(red->on_device());
      REQUIRE(red->rank() == topo.local_rank());
      REQUIRE(red->size() == topo.local_size());
      const size_t n = 2500;
      const int lr = red->rank(), ls = red->size();

      std::vector<float> buf(n), mine(n);
      for (size_t i = 0; i < n; ++i) buf[i] = mine[i] = value(lr, 0, i);
      red->reduce_to_leader(buf.data(), n);
      bool ok = true;
      if (lr == 0) {
        std::vector<float> want(n);  // what one rank computes alone: ((v0 + v1) + v2) + …
        for (size_t i = 0; i < n; ++i) {
          want[i] = value(0, 0, i);
          for (int m = 1; m < ls; ++m) want[i] += value(m, 0, i);
        }
        ok = same_bits(buf, want);
      } else {
        ok = same_bits(buf, mine);  // members' buffers are left alone
      }
      CHECK(ok);
      REQUIRE(all_ranks(ok));

      for (size_t i = 0; i < n; ++i) buf[i] = lr == 0 ? value(99, 1, i) : std::numeric_limits<float>::quiet_NaN();
      red->broadcast_from_leader(buf.data(), n);
      std::vector<float> want(n);
      for (size_t i = 0; i < n; ++i) want[i] = value(99, 1, i);
      REQUIRE(all_ranks(same_bits(buf, want)));

      for (size_t i = 0; i < n; ++i) buf[i] = mine[i] = value(lr, 2, i);
      red->allreduce(buf.data(), n);
      detail::Allreduce workers_allreduce(topo.node_comm(), chunk);  // the workers' algorithm for this count
      workers_allreduce.allreduce(mine.data(), n);
      double worst = 0;
      for (size_t i = 0; i < n; ++i) {
        double s = 0;
        for (int m = 0; m < ls; ++m) s += value(m, 2, i);
        worst = std::max(worst, std::abs(buf[i] - s));
      }
      CHECK(worst < 1e-6);
      REQUIRE(all_ranks(same_bits(buf, mine) && worst < 1e-6));
    }
}

TEST_CASE("intra-node reducer: 'nccl' without a CUDA arena is a UsageError; 'auto' falls back to mpi",
          "[mpi][comm][device]") {
  Topology topo(MPI_COMM_WORLD, {0, 0});
  IntraNodeOptions o;
  o.node_comm = topo.node_comm();
  o.prefer = "nccl";
  CHECK_THROWS_AS(make_intra_node_reducer(o), dtrain::UsageError);
  o.prefer = "fastest";
  CHECK_THROWS_AS(make_intra_node_reducer(o), dtrain::UsageError);
  o.prefer = "auto";
  auto red = make_intra_node_reducer(o);
  CHECK(std::string(red->name()) == "mpi");
  CHECK_FALSE(red->on_device());  // a host arena: the MPI reducer works on host buffers
}

namespace {

struct Layout {
  Mode mode;
  int ps, rpn;
};

std::vector<Layout> layouts(int ws) {
  std::vector<Layout> l{{Mode::allreduce, 0, 0}, {Mode::ps, 1, 0}, {Mode::hybrid, 1, 1}, {Mode::hybrid, 1, 0}};
  if ((ws - 1) % 2 == 0) l.push_back({Mode::hybrid, 1, 2});
  if (ws >= 4 && (ws - 2) % 2 == 0) l.push_back({Mode::hybrid, 2, 2});
  return l;
}

// The fake device: where the arena lives, and what the hooks did.
struct FakeDevice {
  std::vector<float> params, grads;
  size_t downloads = 0, uploads = 0;
  bool in_device(const float* p) const {
    auto in = [&](const std::vector<float>& v) { return p >= v.data() && p < v.data() + v.size(); };
    return in(params) || in(grads);
  }
};

constexpr size_t kArena = 200000;
constexpr int kSteps = 3;
// ps/hybrid: skipped by the servers' check. The last step: the gradients do
// not depend on the parameters, so only the final pull shows a worker that
// kept the speculative parameters of a rolled-back step.
constexpr int64_t kNanStep = kSteps - 1;

float param0(size_t i) { return std::cos(0.01f * static_cast<float>(i % 10007)); }

// `device`: "" (host arena), or the reducer placement "in-place" / "staged".
std::vector<float> run(const Layout& l, const std::string& device, size_t* hook_calls) {
  const int r = world_rank();
  Topology topo(MPI_COMM_WORLD, {l.ps, l.rpn});
  FakeDevice dev;
  dev.params.assign(kArena, 0.0f);
  dev.grads.assign(kArena, 0.0f);
  bool bad_pointer = false;
  ExchangeOptions o;
  o.mode = l.mode;
  o.bucket_bytes = size_t{48} << 10;
  o.max_chunk_elems = 5000;
  if (!device.empty() && topo.is_worker()) {
    o.device.enabled = true;
    o.device.host_addressable = device == "in-place";
    o.device.download = [&](const float* d, float* h, size_t n) {
      bad_pointer |= !dev.in_device(d) || dev.in_device(h);
      std::memcpy(h, d, n * sizeof(float));
      ++dev.downloads;
    };
    o.device.upload = [&](const float* h, float* d, size_t n) {
      bad_pointer |= !dev.in_device(d) || dev.in_device(h);
      std::memcpy(d, h, n * sizeof(float));
      ++dev.uploads;
    };
    o.device.host_alloc = [](size_t bytes) {
      auto* p = static_cast<float*>(std::malloc(bytes));
      for (size_t i = 0; i < bytes / sizeof(float); ++i) p[i] = std::numeric_limits<float>::quiet_NaN();
      return static_cast<void*>(p);
    };
    o.device.host_free = [](void* p) { std::free(p); };
  }
  Exchange ex(topo, o, kArena);
  if (!device.empty() && topo.is_worker()) {
    const std::string want = l.mode == Mode::ps ? "" : "mpi";
    CHECK(ex.node_reducer() == want);
  }
  std::vector<float> host(kArena, r == 0 ? 0.0f : 7.0f);
  if (r == 0)
    for (size_t i = 0; i < kArena; ++i) host[i] = param0(i);
  ex.broadcast_params(host.data());
  if (topo.is_server()) {
    std::vector<float> mom(kArena, 0.0f);
    ServeHooks hooks;
    hooks.rule = [&](float* p, const float* g, size_t b, size_t e, int64_t) {
      for (size_t i = b; i < e; ++i) {
        mom[i] = 0.9f * mom[i] + g[i];
        p[i] -= 0.05f * mom[i];
      }
    };
    hooks.rule_into = [](const float* const* in, float* const* out, const float* g, size_t b, size_t e, int64_t) {
      for (size_t i = b; i < e; ++i) {
        out[1][i] = 0.9f * in[1][i] + g[i];
        out[0][i] = in[0][i] - 0.05f * out[1][i];
      }
    };
    hooks.speculate = true;  // ps: step kNanStep is rolled back and its slices return again
    hooks.state = {mom.data()};
    ex.serve(host.data(), hooks);
    return {};
  }
  // The worker's arena: host vectors, or the fake device's.
  float* p = host.data();
  std::vector<float> host_g(kArena);
  float* g = host_g.data();
  if (!device.empty()) {
    dev.params = host;
    p = dev.params.data();
    g = dev.grads.data();
  }
  std::vector<float> mom(kArena, 0.0f);
  std::mt19937_64 rng(static_cast<unsigned>(r) * 7919u + 3);
  for (int64_t step = 0; step < kSteps; ++step) {
    for (size_t i = 0; i < kArena; ++i) g[i] = value(r, step, i);
    // ps/hybrid: a NaN where backward reports last, on the last worker; the
    // servers skip the step (ps: after returning the rest speculatively).
    if (l.mode != Mode::allreduce && step == kNanStep && r == topo.num_workers() - 1)
      g[0] = std::numeric_limits<float>::quiet_NaN();
    if (step % 2 == 0) ex.begin_step(step, p, g);
    else ex.begin_step(step);  // arena only at finish_step
    for (size_t end = kArena; end > 0;) {
      const size_t size = 1 + rng() % (kArena / 10), begin = end > size ? end - size : 0;
      ex.grads_ready(begin, end);
      end = begin;
    }
    ex.finish_step(p, g);
    if (l.mode == Mode::allreduce)
      for (size_t i = 0; i < kArena; ++i) {
        mom[i] = 0.9f * mom[i] + g[i];
        p[i] -= 0.05f * mom[i];
      }
  }
  ex.stop();
  CHECK_FALSE(bad_pointer);
  *hook_calls = dev.downloads + dev.uploads;
  return std::vector<float>(p, p + kArena);
}

}  // namespace

// (ps/hybrid runs skip a step with a NaN, ps servers rolling it back: the
// device arena must end with the host arena's parameters there too.)
TEST_CASE("exchange with a device arena (fake device, MPI reducer in place or staged) equals the host exchange, bitwise",
          "[mpi][comm][device]") {
  for (const Layout& l : layouts(world_size())) {
    size_t calls = 0;
    const std::vector<float> want = run(l, "", &calls);
    calls = 0;
    for (const char* placement : {"in-place", "staged"}) {
      INFO("mode " << mode_name(l.mode) << ", ps " << l.ps << ", ranks-per-node " << l.rpn << ", reducer "
                   << placement);
      const std::vector<float> got = run(l, placement, &calls);
      // run() gives a worker the arena, a server (one of the last l.ps ranks)
      // nothing: a worker with an empty result would compare equal vacuously.
      const bool worker = world_rank() < world_size() - l.ps;
      REQUIRE(all_ranks(worker ? want.size() == kArena && got.size() == kArena : want.empty() && got.empty()));
      bool ok = same_bits(got, want);
      if (worker) CHECK(ok);
      if (worker && l.mode != Mode::allreduce) {  // the NaN step was skipped, not applied
        const bool finite = std::all_of(got.begin(), got.end(), [](float x) { return std::isfinite(x); });
        CHECK(finite);
        ok = ok && finite;
      }
      REQUIRE(all_ranks(ok));
      // The data went through the hooks — except for a one-node allreduce with the
      // reducer in place, which (like NCCL) never leaves the device. In hybrid with
      // the reducer in place only leaders stage, so count over all ranks.
      unsigned long long mine = calls, total = 0;
      MPI_Allreduce(&mine, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      if (l.mode == Mode::allreduce && std::string(placement) == "in-place") CHECK(total == 0);
      else CHECK(total > 0);
    }
  }
}
