// tests/test_perfmodel.cpp — the performance model against hand arithmetic.
#include <catch2/catch.hpp>

#include <climits>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "engine/perfmodel.hpp"

using namespace dtrain::engine::perf;

TEST_CASE("efficiency and speedup (Zou et al. 2017)", "[perfmodel]") {
  // R_O = 0.1, G = 8: α = 1.1 / 1.8 = 0.6111…, S = 8·0.6111 = 4.888…
  CHECK(efficiency(0.1, 8) == Approx(1.1 / 1.8));
  CHECK(speedup(0.1, 8) == Approx(8 * 1.1 / 1.8));
  CHECK(efficiency(0.1, 1) == Approx(1.0));  // one worker: no loss
  CHECK(speedup(0.0, 64) == Approx(64.0));   // no overhead: linear
  // Saturation: (1 + 0.1)/0.1 = 11.
  CHECK(speedup_limit(0.1) == Approx(11.0));
  CHECK(speedup(0.1, 100000) == Approx(11.0).epsilon(1e-3));
  // Largest G at α* = 0.8 with R_O = 0.05: ((1.05/0.8) − 1)/0.05 = (1.3125 − 1)/0.05 = 6.25 → 6.
  CHECK(max_workers(0.05, 0.8) == 6);
  CHECK(efficiency(0.05, 6) >= 0.8);
  CHECK(efficiency(0.05, 7) < 0.8);
  CHECK(max_workers(0.0, 0.9) == INT_MAX);
  REQUIRE_THROWS_AS(efficiency(-1, 2), dtrain::Error);
  REQUIRE_THROWS_AS(efficiency(0.1, 0), dtrain::Error);
}

TEST_CASE("parameter-server count", "[perfmodel]") {
  // AlexNet: P = 244 MB, 8 senders, B_ps = 1.25 GB/s (10 GbE), T_C = 0.5 s:
  // 2·8·244e6 / (1.25e9·0.5) = 3904e6 / 625e6 = 6.2464 → 7 servers.
  CHECK(ps_count(8, 244e6, 1.25e9, 0.5) == 7);
  // Full duplex halves the traffic: 3.1232 → 4.
  CHECK(ps_count(8, 244e6, 1.25e9, 0.5, true) == 4);
  // Hybrid with 2 nodes of 4 GPUs: G = 2 senders → 2·2·244e6/625e6 = 1.5616 → 2.
  CHECK(ps_count(2, 244e6, 1.25e9, 0.5) == 2);
  CHECK(ps_count(1, 1.0, 1e9, 1.0) == 1);  // never 0
  // The paper's observation: 244 MB over 1 GbE (0.125 GB/s) takes 2·244e6/0.125e9 = 3.9 s
  // per iteration on the sender's own link — far above a 0.5 s T_C.
  CHECK_FALSE(sender_link_ok(244e6, 0.125e9, 0.5));
  CHECK(sender_link_ok(244e6, 12.5e9, 0.5));  // 100 Gb/s InfiniBand: 0.039 s
  // Exchange time: max(2·4·1e8/(2·1e9), 2·1e8/1e10) = max(0.4, 0.02) = 0.4 s.
  CHECK(ps_exchange_time(4, 2, 1e8, 1e9, 1e10) == Approx(0.4));
  // Ring allreduce of 100 MB over 4 ranks at 1 GB/s: 2·3/4·0.1 = 0.15 s.
  CHECK(ring_allreduce_time(4, 1e8, 1e9) == Approx(0.15));
}

TEST_CASE("BytePS closed form", "[perfmodel]") {
  // k = 0 is the allreduce optimum: 2n(n−1)M/(n²B) = 2(n−1)/n · M/B.
  CHECK(byteps_time(4, 0, 1e8, 1e9) == Approx(ring_allreduce_time(4, 1e8, 1e9)));
  // k = n: 2n(n−1)M/((2n² − 2n)B) = M/B — the PS optimum.
  CHECK(byteps_time(8, 8, 1e8, 1e9) == Approx(0.1));
  // n = 4, k = 2: 2·4·3/(16 + 8 − 4) = 24/20 = 1.2 → 0.12 s for 100 MB at 1 GB/s.
  CHECK(byteps_time(4, 2, 1e8, 1e9) == Approx(0.12));
}

TEST_CASE("minibatch at the knee of the throughput curve", "[perfmodel]") {
  std::vector<MinibatchCandidate> c{
      {16, 1e9, 100}, {32, 2e9, 180}, {64, 4e9, 196}, {128, 8e9, 200}, {256, 16e9, 201}};
  // Budget 10 GB: 256 does not fit; best fitting = 200 (128); within 5%: ≥ 190 → 64 is the knee.
  CHECK(c[static_cast<size_t>(choose_minibatch(c, 10e9, 0.05))].minibatch == 64);
  // Tolerance 1%: ≥ 198 → 128.
  CHECK(c[static_cast<size_t>(choose_minibatch(c, 10e9, 0.01))].minibatch == 128);
  CHECK(choose_minibatch(c, 0.5e9) == -1);
}

TEST_CASE("linear learning-rate scaling with warm-up (Goyal et al. 2017)", "[perfmodel]") {
  ScaledLr s = scale_lr(0.1, 256, 8192);
  CHECK(s.lr == Approx(3.2));
  CHECK(s.warmup_epochs == Approx(5.0));
  CHECK(scale_lr(0.05, 64, 64).warmup_epochs == 0.0);
}

TEST_CASE("exposed exchange: what overlaps backward, and the last bucket", "[perfmodel]") {
  RunShape r;
  r.param_bytes = 100e6;
  r.bucket_bytes = 1e6;  // the last bucket: 1% of the arena
  // No overlap credited: the whole exchange.
  CHECK(exposed_exchange(0.5, 0.3, r) == 0.5);
  r.overlap = 2.0 / 3.0;  // window 0.2 s at T_C = 0.3 s
  // allreduce: every bucket's ring may run in the window.
  CHECK(exposed_exchange(0.5, 0.3, r) == Approx(0.3));
  CHECK(exposed_exchange(0.1, 0.3, r) == Approx(0.001));  // all hidden but the last bucket's 1%
  // ps and hybrid: only the pushes (half) may; the pulls follow the joint check.
  r.mode = dtrain::comm::Mode::ps;
  CHECK(exposed_exchange(0.5, 0.3, r) == Approx(0.25 + 0.05));
  CHECK(exposed_exchange(0.1, 0.3, r) == Approx(0.05 + 0.0005));
  r.mode = dtrain::comm::Mode::hybrid;
  CHECK(exposed_exchange(0.1, 0.3, r) == Approx(0.05 + 0.0005));
  // An arena of one bucket leaves only when backward ends: nothing hidden.
  r.param_bytes = 0.5e6;
  CHECK(exposed_exchange(0.1, 0.3, r) == Approx(0.1));
  CHECK(exposed_exchange(0, 0.3, r) == 0);
  r.overlap = 1.5;
  CHECK_THROWS_AS(exposed_exchange(0.1, 0.3, r), dtrain::Error);
}

TEST_CASE("step-time model of a run on a shared machine", "[perfmodel]") {
  // 2 cores, idle: 1 worker, T_C1 = 10 ms → ρ = 0.5, κ = 1, no exchange: step = 10 ms.
  RunShape one;
  one.param_bytes = 1e6;
  Links l;
  l.intra = l.inter = {1e9, 1e-5};
  MachineLoad m{2, 0, 0.012, 0.0015};
  StepPrediction p = predict_step(0.010, one, l, m);
  CHECK(p.contention == Approx(1.0));
  CHECK(p.t_step == Approx(0.010));
  // 4 workers, ps with 2 servers, background 1 core: ρ = (4 + 1)/2 = 2.5 = κ.
  // T_C = 2.5·10 = 25 ms. Exchange: max(2·4·1e6/(2·1e9), 2·1e6/1e9) = max(4, 2) ms = 4 ms,
  // + latency 2·1e-5·4/2 = 0.04 ms → 4.04 ms, ·κ = 10.1 ms.
  // Wake-up: slice = max(1.5, 12/2.5 = 4.8) = 4.8 ms; wait = (1.5/2.5)·4.8 = 2.88 ms; 2 hops → 5.76 ms.
  RunShape ps = one;
  ps.mode = dtrain::comm::Mode::ps;
  ps.workers = 4;
  ps.servers = 2;
  CHECK(sync_hops(ps) == 2);
  CHECK(wakeup_wait(2.5, m) == Approx(0.00288));
  p = predict_step(0.010, ps, l, {2, 1, 0.012, 0.0015});
  CHECK(p.contention == Approx(2.5));
  CHECK(p.t_c == Approx(0.025));
  CHECK(p.t_o == Approx(0.0101 + 0.00576));
  CHECK(p.t_step == Approx(0.025 + 0.0101 + 0.00576));
  // Hybrid, K = 2: hops 2 + 2·1 = 4; exchange: intra 2·1/2·1e6/1e9 = 1 ms + 2·1·1e-5 = 0.02 ms,
  // leaders (2 nodes) ⇄ 1 server: max(2·2·1e6/1e9, 2e-3) = 4 ms + 2·1e-5·2 = 0.04 ms → 5.06 ms.
  RunShape hy = ps;
  hy.mode = dtrain::comm::Mode::hybrid;
  hy.servers = 1;
  hy.ranks_per_node = 2;
  CHECK(hy.nodes() == 2);
  CHECK(sync_hops(hy) == 4);
  CHECK(exchange_time(hy, l) == Approx(0.00506));
  // Allreduce over 4 on one node: 2·3/4·1 ms = 1.5 ms + 2·3·1e-5 = 0.06 ms; hops ⌈log2 4⌉ = 2.
  RunShape ar = ps;
  ar.mode = dtrain::comm::Mode::allreduce;
  ar.servers = 0;
  CHECK(exchange_time(ar, l) == Approx(0.00156));
  CHECK(sync_hops(ar) == 2);
  // Oversubscribed a lot: ρ = 20 → slice = max(1.5, 0.6) = 1.5 ms; wait = 0.95·1.5 = 1.425 ms.
  CHECK(wakeup_wait(20, m) == Approx(0.001425));
  CHECK(wakeup_wait(1.0, m) == 0.0);
  CHECK(cpu_contention(1, 2) == 1.0);
  REQUIRE_THROWS_AS(predict_step(0, one, l, m), dtrain::Error);
}

TEST_CASE("compute phase: stragglers, time sharing, polling threads", "[perfmodel]") {
  MachineLoad idle{2, 0, 0.012, 0.0015};
  // One sample: the worker's own time when its threads fit the cores.
  CHECK(compute_phase({0.010}, 1, 1, idle) == Approx(0.010));
  CHECK(compute_phase({0.010}, 2, 1, idle) == Approx(0.010));
  // 4 workers × 1 thread on 2 cores: ρ = 2 → the work over the cores, 2·10 ms.
  CHECK(compute_phase({0.010}, 4, 1, idle) == Approx(0.020));
  // Background 1 core: ρ = 2.5, capacity = 2·4/5 = 1.6 cores → 40 ms / 1.6 = 25 ms (= κ·t).
  MachineLoad busy = idle;
  busy.background = 1;
  CHECK(compute_phase({0.010}, 4, 1, busy) == Approx(0.025));
  // Stragglers: samples {1, 3} ms, 2 workers, 2 cores: tuples (1,1) (1,3) (3,1) (3,3):
  // max 1, 3, 3, 3 (the work bound Σ/2 never exceeds the max) → mean 2.5 ms.
  CHECK(compute_phase({0.001, 0.003}, 2, 1, idle) == Approx(0.0025));
  // The same on 1 core: phase = max(max, Σ) = Σ: 2, 4, 4, 6 → 4 ms.
  MachineLoad one_core{1, 0, 0.012, 0.0015};
  CHECK(compute_phase({0.001, 0.003}, 2, 1, one_core) == Approx(0.004));
  // Time-share inflation η = 1.1 applies only when oversubscribed.
  MachineLoad eta = idle;
  eta.time_share = 1.1;
  CHECK(compute_phase({0.010}, 4, 1, eta) == Approx(0.022));
  CHECK(compute_phase({0.010}, 2, 1, eta) == Approx(0.010));
  // Polling threads: 6 waiting × φ 0.05 = 0.3 cores off 2 → 40 ms / 1.7.
  MachineLoad poll = idle;
  poll.poll_fraction = 0.05;
  CHECK(compute_phase({0.010}, 4, 1, poll, 6) == Approx(0.040 / 1.7));
  // Many samples and workers: 4096 fixed pseudo-random draws, deterministic, between min and max.
  std::vector<double> many;
  for (int i = 1; i <= 50; ++i) many.push_back(1e-3 * i);
  const double a = compute_phase(many, 8, 1, {64, 0, 0.012, 0.0015});
  CHECK(a == compute_phase(many, 8, 1, {64, 0, 0.012, 0.0015}));
  CHECK(a > 0.025);  // E[max of 8 uniform draws from 1..50 ms] ≈ 45 ms
  CHECK(a < 0.050);
  REQUIRE_THROWS_AS(compute_phase({}, 1, 1, idle), dtrain::Error);
  REQUIRE_THROWS_AS(compute_phase({-1.0}, 1, 1, idle), dtrain::Error);
}

TEST_CASE("compute phase: a table's rows drawn one after another equal each drawn alone", "[perfmodel]") {
  std::vector<double> many, shifted;
  for (int i = 1; i <= 50; ++i) {
    many.push_back(1e-3 * i);
    shifted.push_back(1e-3 * i + 2e-3);
  }
  MachineLoad load;
  load.cores = 2;
  load.background = 0.5;
  load.time_share = 1.05;
  // Each G alone, on a fresh thread (nothing drawn before it there).
  auto alone = [&](const std::vector<double>& t, int g) {
    double v = 0;
    std::thread([&] { v = compute_phase(t, g, 1, load); }).join();
    return v;
  };
  std::vector<double> seq, seq_shifted;
  for (int g = 1; g <= 300; ++g) {  // the order a table asks in: two sample sets a row
    seq.push_back(compute_phase(many, g, 1, load));
    seq_shifted.push_back(compute_phase(shifted, g, 1, load));
  }
  for (int g : {1, 2, 3, 17, 64, 299, 300}) {
    CHECK(seq[g - 1] == alone(many, g));
    CHECK(seq_shifted[g - 1] == alone(shifted, g));
  }
  CHECK(compute_phase(many, 5, 1, load) == alone(many, 5));  // back to a smaller G after a larger one
  // More workers on 2 cores: the phase grows (the work bound), and stays at or above the largest draw's mean.
  for (int g = 2; g <= 300; ++g) CHECK(seq[g - 1] >= seq[g - 2] * 0.999);
  CHECK(seq[299] == Approx(1.05 * 300 * 0.0255 / (2 * 300.0 / 300.5)).epsilon(0.01));
}

TEST_CASE("sleeping waits: threads that poll and the hop latency", "[perfmodel]") {
  RunShape r;
  r.mode = dtrain::comm::Mode::ps;
  r.workers = 4;
  r.servers = 2;
  CHECK(waiting_threads(r) == 0);  // spinning waits are counted by wakeup_wait instead
  r.sleeping_waits = true;
  CHECK(waiting_threads(r) == 6);
  RunShape one;
  one.sleeping_waits = true;
  CHECK(waiting_threads(one) == 0);  // a lone worker exchanges nothing
  MachineLoad m{2, 0, 0.012, 0.0015};
  m.poll_period = 300e-6;
  CHECK(hop_wait(true, 3.0, m) == Approx(150e-6));
  CHECK(hop_wait(false, 2.5, m) == Approx(wakeup_wait(2.5, m)));
  // ps, 4 workers, 2 servers, sleeping: T_O = exchange + 2 hops · 150 µs.
  Links l;
  l.intra = l.inter = {1e9, 1e-5};
  r.param_bytes = 1e6;
  m.poll_fraction = 0.0;
  StepPrediction p = predict_step(0.010, r, l, m);
  CHECK(p.t_c == Approx(0.020));
  CHECK(p.t_o == Approx(exchange_time(r, l) * 2 + 2 * 150e-6));
}
