// engine/bench_comm.cpp — `dtrain bench comm`: time and bandwidth of the three
// exchange modes next to raw MPI_Allreduce of the same size on the same ranks,
// and the point-to-point limit (a ping-pong of the same size between world
// ranks 0 and 1).
//
// Each size is measured in --pairs rounds (default 3); a round times every
// column once, back to back (median of --iters operations each). Times are
// the medians over the rounds; `ratio` and `ps % of pp` are the medians of
// each round's own ratio, so a drift of the machine's speed between rounds
// (this VM's ping-pong bandwidth moves by 2× between runs) cancels.
//
// Figures per message size S bytes (t = median time of one operation):
//   algbw = S / t
//   busbw (allreduce) = algbw · 2(n−1)/n   (NCCL's convention: the bytes each
//                                          rank must move in an optimal ring)
//   busbw (ps, hybrid) = algbw · 2         (each sender pushes S and pulls S)
//   ping-pong bandwidth B_pp = S / (round trip / 2)
//   ratio = t(MPI_Allreduce) / t(dtrain allreduce)   (> 1: dtrain faster)
//   ps % of pp = (2·S·W / (N_ps·B_pp)) / t(ps): the ps step against what a
//                server must move, W senders' S/N_ps in and out, at the
//                ping-pong bandwidth (DESIGN.md §4's 2·G·P / (N_ps·B_ps); with
//                2 ranks, 1 worker + 1 server: two one-way transfers of S;
//                100%: the server's work is hidden; above 100%: pulls overlap
//                pushes, as the speculating servers allow — `--wait-for-check`
//                times the protocol without speculation, comm::ServeHooks)
//
// `--algorithms`: the data behind comm/allreduce.hpp's crossover table — per
// size (×2 steps from --min-kb to --max-mb), MPI_Allreduce, recursive doubling
// and the ring over all ranks, interleaved call by call (medians of --iters
// rounds), which of the two the table picks, and MPI's time over the picked one.
//
// `--links`: only the two links a scaling study rests on, from rank 0: to the
// first other rank of its node (intra-node) and to the first rank of another
// node (inter-node; none on one node). Latency = the fastest one-way time of 8
// bytes (50 round trips); bandwidth = S / (median one-way time of S − latency)
// with S = --max-mb (tune_profile's measure_link, what `dtrain tune` uses).
// Prints one line per link and a JSON line
//   {"kind":"links","intra":{"ranks":[0,r],"latency_us":..,"gbps":..},"inter":{..}|null,"bytes":S}
// (gbps: 10^9 bits/s, the unit of link rates and of tc).
#include <mpi.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "comm/allreduce.hpp"
#include "comm/discovery.hpp"
#include "comm/exchange.hpp"
#include "comm/topology.hpp"
#include "core/error.hpp"
#include "engine/options.hpp"
#include "engine/commands.hpp"
#include "engine/report.hpp"  // median
#include "engine/tune_profile.hpp"

namespace po = boost::program_options;

namespace dtrain::engine {

namespace {

double now() { return MPI_Wtime(); }

// "256 KiB", "1.5 KiB", "320 B": whole numbers where the size is whole in its
// unit, else 3 significant digits, so no two rows of a table read alike.
std::string size_label(double bytes) {
  const double v = bytes >= 1048576 ? bytes / 1048576 : bytes >= 1024 ? bytes / 1024 : bytes;
  const char* unit = bytes >= 1048576 ? "MiB" : bytes >= 1024 ? "KiB" : "B";
  char label[32];
  std::snprintf(label, sizeof label, v == std::round(v) ? "%.0f %s" : "%.3g %s", v, unit);
  return label;
}

// One call of op on every rank of c, timed on the slowest rank (seconds; the
// same figure on every rank). Collective over c.
template <class Op>
double slowest_call(MPI_Comm c, Op&& op) {
  DT_CHECK_MPI(MPI_Barrier(c));
  const double t0 = now();
  op();
  double dt = now() - t0, worst = 0;
  DT_CHECK_MPI(MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, c));
  return worst;
}

// Time of one exchange step of `floats` gradients in mode m (median over iters), on the workers;
// servers serve. Returns the time on world rank 0 (0 on servers).
double time_exchange(const comm::Topology& topo, comm::Mode m, size_t floats, int iters, bool speculate) {
  comm::ExchangeOptions eo;
  eo.mode = m;
  eo.bucket_bytes = std::max<size_t>(floats * 4 / 4, 1 << 20);  // ~4 buckets for large messages
  comm::Exchange ex(topo, eo, floats);
  std::vector<float> params(floats, 1.0f), grads(floats, 1e-3f);
  if (topo.is_server()) {
    comm::ServeHooks hooks;
    hooks.rule = [](float* p, const float* g, size_t b, size_t e, int64_t) {
      for (size_t i = b; i < e; ++i) p[i] -= 0.01f * g[i];
    };
    hooks.rule_into = [](const float* const* in, float* const* out, const float* g, size_t b, size_t e, int64_t) {
      for (size_t i = b; i < e; ++i) out[0][i] = in[0][i] - 0.01f * g[i];
    };
    hooks.speculate = speculate;  // the rule has no state besides the parameters
    ex.serve(params.data(), hooks);
    return 0;
  }
  std::vector<double> t;
  for (int i = 0; i < iters + 1; ++i) {
    const double dt = slowest_call(topo.workers(), [&] {
      ex.begin_step(i, params.data(), grads.data());
      ex.grads_ready(0, floats);
      ex.finish_step(params.data(), grads.data());
    });
    if (i > 0) t.push_back(dt);  // the first is a warm-up
  }
  ex.stop();
  return median(t);
}

double time_mpi_allreduce(MPI_Comm c, size_t floats, int iters) {
  DT_CHECK(floats < (size_t{1} << 31), "raw MPI_Allreduce of more than 2^31 elements");
  std::vector<float> a(floats, 1.0f), b(floats);
  std::vector<double> t;
  for (int i = 0; i < iters + 1; ++i) {
    const double dt = slowest_call(c, [&] {
      DT_CHECK_MPI(MPI_Allreduce(a.data(), b.data(), static_cast<int>(floats), MPI_FLOAT, MPI_SUM, c));
    });
    if (i > 0) t.push_back(dt);
  }
  return median(t);
}

// MPI_Allreduce, recursive doubling and the ring (comm/allreduce.hpp) over
// all ranks, interleaved call by call (one warm-up round, then `iters`), per
// size in ×2 steps: the data behind the crossover (latency_max_for).
int bench_algorithms(double min_bytes, double max_bytes, int iters, int rank, int size) {
  using comm::detail::AllreduceAlgo;
  if (rank == 0) {
    std::printf("dtrain bench comm --algorithms: %d ranks; median us of one in-place allreduce, the three interleaved "
                "call by call (%d rounds)\n", size, iters);
    std::printf("%10s %14s %14s %10s %20s %10s\n", "size", "MPI_Allreduce", "rec.doubling", "ring", "picked",
                "MPI/picked");
  }
  const size_t whole = (size_t{1} << 31) - 1;  // no chunking beyond the algorithms' own
  comm::detail::RecursiveDoubling rd(MPI_COMM_WORLD, whole);
  comm::detail::RingAllreduce ring(MPI_COMM_WORLD, whole);
  for (double bytes = min_bytes; bytes <= max_bytes + 1; bytes *= 2) {
    const size_t floats = std::max<size_t>(1, static_cast<size_t>(bytes) / 4);
    DT_CHECK(floats <= whole, "an allreduce of more than 2^31 elements");
    std::vector<float> x(floats, 1.0f);
    const std::function<void()> run[3] = {
        [&] {
          DT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, x.data(), static_cast<int>(floats), MPI_FLOAT, MPI_SUM,
                                     MPI_COMM_WORLD));
        },
        [&] { rd.allreduce(x.data(), floats); }, [&] { ring.allreduce(x.data(), floats); }};
    std::vector<double> t[3];
    for (int i = 0; i <= iters; ++i)
      for (int a = 0; a < 3; ++a) {
        const double dt = slowest_call(MPI_COMM_WORLD, run[a]);
        if (i > 0) t[a].push_back(dt);
      }
    const double t_mpi = median(t[0]), t_rd = median(t[1]), t_ring = median(t[2]);
    const bool picks_rd = comm::detail::algorithm_for(floats * sizeof(float), comm::detail::latency_max_for(size)) == AllreduceAlgo::recursive_doubling;
    if (rank == 0) {
      std::printf("%10s %14.1f %14.1f %10.1f %20s %10.2f\n", size_label(bytes).c_str(), 1e6 * t_mpi, 1e6 * t_rd,
                  1e6 * t_ring, picks_rd ? "recursive doubling" : "ring", t_mpi / (picks_rd ? t_rd : t_ring));
      std::fflush(stdout);
    }
  }
  return kExitOk;
}

int bench_links(int rpn, size_t bytes, int rank) {
  const int same = comm::same_node_rank(MPI_COMM_WORLD, rpn), other = comm::other_node_rank(MPI_COMM_WORLD, rpn);
  std::string json = "{\"kind\":\"links\",\"bytes\":" + std::to_string(bytes);
  for (auto [name, peer] : {std::pair{"intra", same}, std::pair{"inter", other}}) {
    if (peer < 0) {
      json += std::string(",\"") + name + "\":null";
      if (rank == 0) std::printf("%s-node link: none (no such rank)\n", name);
      continue;
    }
    const perf::Link l = measure_link(MPI_COMM_WORLD, 0, peer, bytes);
    char buf[160];
    std::snprintf(buf, sizeof buf, ",\"%s\":{\"ranks\":[0,%d],\"latency_us\":%.2f,\"gbps\":%.3f}", name, peer,
                  l.latency * 1e6, l.bandwidth * 8 / 1e9);
    json += buf;
    if (rank == 0)
      std::printf("%s-node link, ranks 0 and %d: latency %.1f us, bandwidth %.3f Gb/s (%.0f MiB messages)\n", name,
                  peer, l.latency * 1e6, l.bandwidth * 8 / 1e9, static_cast<double>(bytes) / 1048576);
  }
  if (rank == 0) std::printf("%s}\n", json.c_str());
  return kExitOk;
}

}  // namespace

int cmd_bench_comm(const std::vector<std::string>& args) {
  int ps = 0, rpn = 0, iters = 5, pairs = 3;
  bool links = false, algorithms = false, wait_check = false;
  double min_kb = 4, max_mb = 256;
  po::options_description desc("dtrain bench comm [--ps N] [--ranks-per-node K] [--min-kb 4] [--max-mb 256] [--iters 5] [--pairs 3] [--wait-for-check] [--algorithms | --links]");
  desc.add_options()("help,h", "this help")("ps", po::value(&ps)->default_value(0), "servers for the ps and hybrid rows (0: world/4, at least 1)")(
      "ranks-per-node", po::value(&rpn)->default_value(0), "virtual nodes for hybrid (0: real nodes)")(
      "min-kb", po::value(&min_kb)->default_value(4), "smallest message, KiB")(
      "max-mb", po::value(&max_mb)->default_value(256), "largest message, MiB")(
      "iters", po::value(&iters)->default_value(5), "timed repetitions per size (median)")(
      "pairs", po::value(&pairs)->default_value(3), "rounds per size, each timing every column once (medians; ratios per round)")(
      "wait-for-check", po::bool_switch(&wait_check),
      "ps servers update and return only after the step's joint non-finite check (no speculation: "
      "comm::ServeHooks)")(
      "links", po::bool_switch(&links), "only the intra- and inter-node ping-pong links (latency, Gb/s) at --max-mb")(
      "algorithms", po::bool_switch(&algorithms),
      "only the allreduce algorithms (MPI_Allreduce, recursive doubling, ring) per size, x2 steps: the crossover table");
  po::variables_map vm = parse_command_line(args, desc, "dtrain bench comm: ");
  if (vm.count("help")) {
    std::printf("%s", (std::ostringstream() << desc).str().c_str());
    return kExitOk;
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) DT_USAGE("dtrain bench comm needs at least 2 ranks (mpirun -np N)");
  if (iters < 1) DT_USAGE("dtrain bench comm: option 'iters' must be >= 1");
  if (pairs < 1) DT_USAGE("dtrain bench comm: option 'pairs' must be >= 1");
  if (!(min_kb >= 1.0 / 256) || !(max_mb * 1024 >= min_kb) || max_mb > 4096)
    DT_USAGE("dtrain bench comm: options 'min-kb' = ", min_kb, " (default 4) and 'max-mb' = ", max_mb,
             " (default 256): the smallest message must be at least 4 bytes and at most the largest, and "
             "max-mb at most 4096");
  if (ps >= size)
    DT_USAGE("dtrain bench comm: option 'ps' = ", ps, " leaves no worker in ", size, " ranks (at most ", size - 1, ")");
  if (links && algorithms) DT_USAGE("dtrain bench comm: options 'links' and 'algorithms' exclude each other");
  if ((links || algorithms) && !vm["pairs"].defaulted())
    DT_USAGE("dtrain bench comm: option 'pairs' applies to the exchange table, not to --", links ? "links" : "algorithms");
  if ((links || algorithms) && wait_check)
    DT_USAGE("dtrain bench comm: option 'wait-for-check' applies to the exchange table, not to --",
             links ? "links" : "algorithms");
  if (links)
    refuse_unread_options(vm, {"ps", "min-kb", "iters"}, "dtrain bench comm: ",
                          "with --links (a ping-pong of --max-mb between ranks, on nodes of --ranks-per-node)");
  if (algorithms)
    refuse_unread_options(vm, {"ps", "ranks-per-node"}, "dtrain bench comm: ",
                          "with --algorithms (allreduce over all ranks: --min-kb, --max-mb, --iters)");
  comm::check_launcher(size);
  const bool speculate = !wait_check;
  if (links) return bench_links(rpn, static_cast<size_t>(max_mb * 1048576.0), rank);
  if (algorithms) return bench_algorithms(min_kb * 1024, max_mb * 1048576.0, iters, rank, size);
  if (ps == 0) ps = std::max(1, size / 4);
  comm::Topology all(MPI_COMM_WORLD, {0, 0});
  const comm::Topology servers(MPI_COMM_WORLD, comm::TopologyOptions{ps, rpn});  // ps < size (checked above)
  const double per_server = static_cast<double>(servers.num_workers()) / servers.num_servers();
  if (rank == 0) {
    std::printf("dtrain bench comm: %d ranks; allreduce rows over all %d; ps/hybrid rows: %s\n", size, size,
                servers.describe().c_str());
    std::printf("%10s %12s %12s %10s %12s %12s %8s %10s %8s %10s\n", "size", "MPI_Allr ms", "allreduce ms", "ratio",
                "busbw GB/s", "pingpong GB/s", "bus/pp", "ps ms", "ps %pp", "hybrid ms");
  }
  const double n = size;
  for (double bytes = min_kb * 1024; bytes <= max_mb * 1048576.0 + 1; bytes *= 4) {
    size_t floats = static_cast<size_t>(bytes) / 4;
    int it = bytes >= 64.0 * 1048576 ? std::max(2, iters / 2) : iters;
    std::vector<double> mpi, ar, pps, pss, hys, ratios, pcts;
    for (int r = 0; r < pairs; ++r) {
      mpi.push_back(time_mpi_allreduce(MPI_COMM_WORLD, floats, it));
      ar.push_back(time_exchange(all, comm::Mode::allreduce, floats, it, speculate));
      pps.push_back(comm::pingpong_seconds(MPI_COMM_WORLD, 0, 1, static_cast<size_t>(bytes), it));
      pss.push_back(time_exchange(servers, comm::Mode::ps, floats, it, speculate));
      hys.push_back(time_exchange(servers, comm::Mode::hybrid, floats, it, speculate));
      ratios.push_back(mpi.back() / ar.back());
      pcts.push_back(100 * 2 * pps.back() * per_server / pss.back());  // (2·S·W / (N_ps·B_pp)) / t_ps; rank 0's
    }
    const double t_mpi = median(mpi), t_ar = median(ar), t_pp = median(pps), t_ps = median(pss), t_hy = median(hys);
    if (rank == 0) {
      double busbw = bytes / t_ar * 2 * (n - 1) / n / 1e9;
      double pp = bytes / t_pp / 1e9;
      const std::string label = size_label(bytes);
      const double ps_pct = median(pcts);
      std::printf("%10s %12.3f %12.3f %10.2f %12.2f %12.2f %8.2f %10.3f %8.0f %10.3f\n", label.c_str(), 1e3 * t_mpi,
                  1e3 * t_ar, median(ratios), busbw, pp, busbw / pp, 1e3 * t_ps, ps_pct, 1e3 * t_hy);
      std::fflush(stdout);
    }
  }
  if (rank == 0)
    std::printf("ratio = MPI_Allreduce time / dtrain allreduce time (> 1: dtrain faster); busbw = size/t · 2(n−1)/n;\n"
                "pingpong = size / one-way time between ranks 0 and 1; ps/hybrid: one push+pull step of the whole message;\n"
                "ps %%pp = 2 · one-way ping-pong time · workers / servers / ps time (100: every server's pushes and\n"
                "pulls at the ping-pong bandwidth; 1 worker + 1 server: push + pull of the message; > 100: pulls\n"
                "overlap pushes, the servers speculating; %s)\n",
                speculate ? "--wait-for-check: without" : "this run: --wait-for-check, not speculating");
  return kExitOk;
}

}  // namespace dtrain::engine
