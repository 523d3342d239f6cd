// tests/test_compute_stand_in.cpp — the compute stand-in (engine/compute_stand_in.hpp):
// its schedule follows backward's ranges and FLOPs, a step lasts X ms, the
// gradient is the constant, and the option's checks name the keys.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "core/error.hpp"
#include "engine/compute_stand_in.hpp"
#include "engine/config.hpp"
#include "tests/config_test_util.hpp"
#include "engine/tune.hpp"
#include "layers/cpu/reference.hpp"
#include "layers/models.hpp"

using dtrain::engine::ComputeStandIn;
using namespace dtrain::layers;

namespace {
using dtrain::test::usage_message;
}  // namespace

TEST_CASE("compute stand-in: backward's ranges on a FLOP-weighted schedule, X ms per step, a constant gradient",
          "[stand-in]") {
  auto be = make_reference_backend();
  ModelOptions o;
  o.minibatch = 4;
  Net net = lenet5(o);
  net.finalize(*be, 1);
  const double ms = 30;
  const ComputeStandIn s(net, ms, 2);
  const std::vector<double>& at = s.ready_at();
  REQUIRE(at.size() == s.events().size());
  REQUIRE(at.size() == 5);  // lenet5: conv1, conv2, fc1, fc2, fc3
  CHECK(at.front() > ms / 3e3);  // after the "forward" third
  for (size_t i = 1; i < at.size(); ++i) CHECK(at[i] > at[i - 1]);
  CHECK(at.back() <= ms / 1e3 + 1e-12);
  // fc3 is last in the arena, first in backward: its range ends the arena.
  CHECK(s.events().front().end == net.num_params());
  CHECK(s.events().back().begin == 0);

  be->fill(net.grads().data(), net.num_params(), -1.0f);
  std::vector<std::pair<size_t, size_t>> ready;
  std::vector<double> when;
  const auto t0 = ComputeStandIn::Clock::now();
  s.step(t0, *be, net.grads().data(), [&](size_t b, size_t e) {
    ready.emplace_back(b, e);
    when.push_back(std::chrono::duration<double>(ComputeStandIn::Clock::now() - t0).count());
  });
  const double took = std::chrono::duration<double>(ComputeStandIn::Clock::now() - t0).count();
  CHECK(took >= ms / 1e3);
  // Not much later (a loaded 2-core machine may wake it late now and then; the
  // integration test it_compute_stand_in checks the median over steps within 5%).
  CHECK(took < ms / 1e3 * 1.5);
  REQUIRE(ready.size() == at.size());
  for (size_t i = 0; i < ready.size(); ++i) {
    CHECK(ready[i].first == s.events()[i].begin);
    CHECK(ready[i].second == s.events()[i].end);
    CHECK(when[i] >= at[i]);
  }
  size_t wrong = 0;
  for (size_t i = 0; i < net.num_params(); ++i) wrong += net.grads().data()[i] != ComputeStandIn::kGradient / 2;
  CHECK(wrong == 0);  // every element written, the workers' sum is kGradient
}

TEST_CASE("compute stand-in option: >= 0, refused with test-data, checkpoint-dir and resume", "[stand-in][config]") {
  dtrain::engine::TrainConfig c;
  REQUIRE(parse_train_args({"--train-data", "a.h5"}, c));
  CHECK(c.compute_stand_in_ms == 0);
  REQUIRE(parse_train_args({"--train-data", "a.h5", "--compute-stand-in-ms", "12.5"}, c));
  CHECK(c.compute_stand_in_ms == 12.5);
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--compute-stand-in-ms", "-1"}),
             Catch::Contains("compute-stand-in-ms"));
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--compute-stand-in-ms", "nan"}),
             Catch::Contains("compute-stand-in-ms"));
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--compute-stand-in-ms", "fast"}),
             Catch::Contains("compute-stand-in-ms"));
  const std::string t = usage_message({"--train-data", "a.h5", "--test-data", "b.h5", "--compute-stand-in-ms", "5"});
  CHECK_THAT(t, Catch::Contains("compute-stand-in-ms") && Catch::Contains("test-data"));
  const std::string k = usage_message({"--train-data", "a.h5", "--checkpoint-dir", "ck", "--compute-stand-in-ms", "5"});
  CHECK_THAT(k, Catch::Contains("compute-stand-in-ms") && Catch::Contains("checkpoint-dir"));
  const std::string r = usage_message({"--train-data", "a.h5", "--resume", "x.h5", "--compute-stand-in-ms", "5"});
  CHECK_THAT(r, Catch::Contains("compute-stand-in-ms") && Catch::Contains("resume"));
  // Off, the other options are as before.
  REQUIRE(parse_train_args({"--train-data", "a.h5", "--test-data", "b.h5", "--compute-stand-in-ms", "0"}, c));
}

TEST_CASE("compute stand-in: a job-file key, and job files written by tune carry it only when set", "[stand-in][config]") {
  dtrain::engine::TrainConfig c;
  c.train_data = "a.h5";
  CHECK_THAT(dtrain::engine::job_file_text(c), !Catch::Contains("compute-stand-in-ms"));  // other jobs' hash unchanged
  c.compute_stand_in_ms = 51.2;
  const std::string text = dtrain::engine::job_file_text(c);
  CHECK_THAT(text, Catch::Contains("\ncompute-stand-in-ms = 51.2\n"));
  const std::string path = "test_stand_in_job.ini";
  {
    std::ofstream f(path);
    f << text;
  }
  dtrain::engine::TrainConfig r;
  REQUIRE(parse_train_args({"--job", path}, r));
  CHECK(r.compute_stand_in_ms == 51.2);
  REQUIRE(parse_train_args({"--job", path, "--compute-stand-in-ms", "0"}, r));  // the command line wins
  CHECK(r.compute_stand_in_ms == 0);
  std::remove(path.c_str());
}
