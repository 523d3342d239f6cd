// tests/test_tune.cpp — the tuner's pure pieces: cluster prediction table and job-file writer.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

#include "engine/config.hpp"
#include "engine/tune.hpp"

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
  // G = 8, ps: N_ps = ⌈2·8·244e6/(0.125e9·0.5)⌉ = ⌈62.464⌉ = 63; exchange = max(3904e6/(63·0.125e9) = 0.4957,
  // 3.904) = 3.904 s → T_O = 3.404 s; G = 1 has the same T_O, so α = 1 (the sender link caps every G).
  CHECK(rows[7].ps_servers == 63);
  CHECK(rows[7].ps_t_o == Approx(3.404));
  // Hybrid at G = 8 (2 nodes): N_ps = ⌈2·2·244e6/62.5e6⌉ = ⌈15.616⌉ = 16.
  CHECK(rows[7].hybrid_servers == 16);
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
  CHECK(r.mean.size() == 1);
  CHECK(r.std[0] == Approx(0.353f));
  CHECK_FALSE(r.decay_bias_bn);
  std::remove(path.c_str());
}
