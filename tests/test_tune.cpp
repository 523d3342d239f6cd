// tests/test_tune.cpp — the tuner's pure pieces: cluster prediction table and job-file writer.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

#include "engine/config.hpp"
#include "engine/tune.hpp"
#include "engine/tune_profile.hpp"
#include "core/error.hpp"

using namespace dtrain::engine;

TEST_CASE("cluster prediction: AlexNet over 1 GbE and 100 Gb/s", "[tune]") {
  // P = 244 MB, T_C = 0.5 s. 1 GbE = 0.125 GB/s: the sender alone needs
  // 2·244e6/0.125e9 = 3.904 s > T_C (the paper's observation).
  perf::Links gbe;
  gbe.intra = {12e9, 0};
  gbe.inter = {0.125e9, 0};
  auto rows = predict_cluster(0.5, 244e6, gbe, 2, 4);
  REQUIRE(rows.size() == 8);
  CHECK_FALSE(rows[0].sender_ok);
  // G = 8, ps: N_ps = ⌈2·8·244e6/(0.125e9·0.5)⌉ = 63, capped at 8 senders (the sender link is the
  // bottleneck); exchange = max(2·8·244e6/(8·0.125e9), 3.904) = 3.904 s → T_O = 3.404 s,
  // α = 0.5/3.904 = 0.128. One GPU exchanges nothing: α(1) = 1.
  CHECK(rows[0].ps_alpha == 1.0);
  CHECK(rows[7].ps_servers == 8);
  CHECK(rows[7].ps_t_o == Approx(3.404));
  CHECK(rows[7].ps_alpha == Approx(0.5 / 3.904));
  // Hybrid at G = 8 (2 nodes): ⌈2·2·244e6/62.5e6⌉ = 16, capped at 2 nodes.
  CHECK(rows[7].hybrid_servers == 2);
  perf::Links ib;
  ib.intra = {12e9, 0};
  ib.inter = {12.5e9, 0};
  rows = predict_cluster(0.5, 244e6, ib, 2, 4);
  // 100 Gb/s: 2·244e6/12.5e9 = 0.039 s ≤ 0.5 → hidden: T_O = 0, α = 1, one server suffices up to
  // 2·8·244e6/(12.5e9·0.5) = 0.62 → 1.
  CHECK(rows[7].sender_ok);
  CHECK(rows[7].ps_servers == 1);
  CHECK(rows[7].ps_t_o == 0.0);
  CHECK(rows[7].ps_alpha == Approx(1.0));
}

TEST_CASE("tuned job file reads back to the same configuration", "[tune]") {
  TrainConfig c;
  c.model = "resnet20";
  c.train_data = "data/fashion-mnist-train.h5";
  c.minibatch = 96;
  c.lr = 0.375f;
  c.mode = "hybrid";
  c.ps = 2;
  c.ranks_per_node = 2;
  c.mean = {0.286f};
  c.std = {0.353f};
  c.decay_bias_bn = false;
  const std::string path = "test_tune_job.ini";
  {
    std::ofstream f(path);
    f << job_file_text(c);
  }
  TrainConfig r;
  REQUIRE(parse_train_args({"--job", path}, r));
  CHECK(r.model == "resnet20");
  CHECK(r.train_data == c.train_data);
  CHECK(r.minibatch == 96);
  CHECK(r.lr == Approx(0.375f));
  CHECK(r.mode == "hybrid");
  CHECK(r.ps == 2);
  CHECK(r.ranks_per_node == 2);
  REQUIRE(r.mean.size() == 1);
  CHECK(r.mean[0] == Approx(0.286f));
  REQUIRE(r.std.size() == 1);
  CHECK(r.std[0] == Approx(0.353f));
  CHECK_FALSE(r.decay_bias_bn);
  std::remove(path.c_str());
}

TEST_CASE("profile: per-process and per-step samples survive JSON, bad ones are usage errors", "[tune]") {
  Profile p;
  p.model = "lenet5";
  p.threads = 1;
  p.cores = 2;
  p.param_bytes = 246824;
  p.poll_period = 350e-6;
  p.poll_fraction = 0.03;
  ComputePoint a;
  a.minibatch = 32;
  a.t_c = 0.004;
  a.process_t_c = {0.004, 0.005};
  a.samples = {0.0035, 0.004, 0.0045, 0.006};
  a.time_share = 1.1;
  ComputePoint b = a;
  b.minibatch = 64;
  b.t_c = 0.008;
  b.samples = {0.007, 0.009};
  p.points = {a, b};
  Profile q = Profile::from_json(nlohmann::json::parse(p.to_json().dump()));
  REQUIRE(q.points.size() == 2);
  CHECK(q.points[0].samples == a.samples);
  CHECK(q.points[0].process_t_c == a.process_t_c);
  CHECK(q.points[1].time_share == Approx(1.1));
  CHECK(q.poll_period == Approx(350e-6));
  CHECK(q.poll_fraction == Approx(0.03));
  // Between the points: T_C interpolated (48 → 6 ms), the nearer point's samples scaled to it.
  CHECK(q.t_c_at(48) == Approx(0.006));
  const std::vector<double> s = q.samples_at(56);  // nearer 64: scaled by 7 ms / 8 ms
  REQUIRE(s.size() == 2);
  CHECK(s[0] == Approx(0.007 * 0.007 / 0.008));
  CHECK(q.time_share_at(40) == Approx(1.1));
  nlohmann::json bad = p.to_json();
  bad["points"][0]["t_c_samples_s"][1] = -1.0;
  REQUIRE_THROWS_AS(Profile::from_json(bad), dtrain::UsageError);
  bad = p.to_json();
  bad["poll_cpu_fraction"] = 2.0;
  REQUIRE_THROWS_AS(Profile::from_json(bad), dtrain::UsageError);
  // Fields perfmodel would divide by, or index: usage errors naming the field, not internal checks later.
  auto refused = [&](auto&& damage, const std::string& field) {
    nlohmann::json b = p.to_json();
    damage(b);
    try {
      Profile::from_json(b);
      FAIL("accepted a profile with a bad " << field);
    } catch (const dtrain::UsageError& e) {
      CHECK_THAT(e.what(), Catch::Matchers::Contains(field));
    }
  };
  refused([](auto& b) { b["points"] = nlohmann::json::array(); }, "points is empty");
  refused([](auto& b) { b["intra"]["bandwidth_Bps"] = 0.0; }, "intra.bandwidth_Bps");
  refused([](auto& b) { b["inter"]["bandwidth_Bps"] = -1.0; }, "inter.bandwidth_Bps");
  refused([](auto& b) { b["inter"]["latency_s"] = -1e-6; }, "inter.latency_s");
  refused([](auto& b) { b["points"][1]["minibatch"] = 0; }, "points[1].minibatch");
  refused([](auto& b) { b["points"][0]["t_c_s"] = 0.0; }, "points[0].t_c_s");
  refused([](auto& b) { b["threads"] = 0; }, "threads");
  refused([](auto& b) { b["cores"] = 0.0; }, "cores");
  refused([](auto& b) { b["param_bytes"] = -1.0; }, "param_bytes");
  refused([](auto& b) { b.erase("model"); }, "model is missing");
  refused([](auto& b) { b = nlohmann::json::array({1, 2}); }, "not a JSON object");
  // An empty profile built in code: a usage error too, not an internal check.
  Profile empty;
  REQUIRE_THROWS_AS(empty.t_c_at(8), dtrain::UsageError);
  REQUIRE_THROWS_AS(empty.samples_at(8), dtrain::UsageError);
  REQUIRE_THROWS_AS(empty.time_share_at(8), dtrain::UsageError);
}
