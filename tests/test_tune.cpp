// tests/test_tune.cpp — the tuner's pure pieces: the prediction tables (engine/predict.hpp),
// the job-file writer and the writing of tune's outputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "engine/config.hpp"
#include "engine/predict.hpp"
#include "engine/report.hpp"
#include "engine/tune.hpp"
#include "engine/tune_profile.hpp"
#include "core/error.hpp"
#include "io/hdf5_dataset.hpp"
#include "tests/test_io_util.hpp"

using namespace dtrain::engine;

namespace {
// A profile of one point: T_C1 at minibatch x, P bytes, the links.
Profile one_point(int x, double t_c, double p, const perf::Links& l) {
  Profile q;
  q.model = "alexnet";
  q.threads = 1;
  q.cores = 2;
  q.param_bytes = p;
  q.links = l;
  ComputePoint c;
  c.minibatch = x;
  c.t_c = t_c;
  c.samples = {t_c};
  q.points = {c};
  return q;
}
}  // namespace

TEST_CASE("median: the middle value, the mean of the middle two for an even count", "[tune]") {
  // The one median of the profile, dtrain report and the benchmarks (an even
  // count once took the upper middle: a 2-step bench printed its slower step).
  CHECK(median({}) == 0.0);
  CHECK(median({5.0}) == 5.0);
  CHECK(median({3.0, 1.0, 2.0}) == 2.0);
  CHECK(median({5.46, 5.82}) == Approx(5.64));
  CHECK(median({4.0, 1.0, 3.0, 2.0}) == 2.5);
}

TEST_CASE("cluster prediction: AlexNet over 1 GbE and 100 Gb/s", "[tune]") {
  // P = 244 MB, T_C = 0.5 s. 1 GbE = 0.125 GB/s: the sender alone needs
  // 2·244e6/0.125e9 = 3.904 s > T_C (the paper's observation).
  perf::Links gbe;
  gbe.intra = {12e9, 0};
  gbe.inter = {0.125e9, 0};
  PredictionTable t = prediction_table(one_point(128, 0.5, 244e6, gbe), 128, 2, 4, Placement::on_cluster());
  auto& rows = t.rows;
  REQUIRE(rows.size() == 8);
  CHECK_FALSE(rows[0].sender_ok);
  // One worker alone exchanges nothing: S(1) = 1 (allreduce). One worker with its
  // server (ps, G = 1) does exchange: 3.904 s. On a cluster the pushes (half of
  // it, 1.952 s) overlap backward, 2/3·T_C = 0.3333 s; the pulls follow the
  // servers' joint check: T_O = 1.952 + (1.952 − 0.3333) = 3.5707 s.
  const double w = 2.0 / 3.0 * 0.5;
  CHECK(rows[0].allreduce_speedup == 1.0);
  CHECK(rows[0].ps_servers == 1);
  CHECK(rows[0].ps_speedup == Approx(0.5 / (0.5 + 1.952 + 1.952 - w)));
  // G = 8, ps: N_ps = ⌈2·8·244e6/(0.125e9·0.5)⌉ = 63, capped at 8 senders (the sender link is the
  // bottleneck); exchange = max(2·8·244e6/(8·0.125e9), 3.904) = 3.904 s, T_O as for G = 1.
  CHECK(rows[7].ps_servers == 8);
  CHECK(rows[7].ps_pred.t_o == Approx(3.904 - w));
  CHECK(rows[7].ps_pred.t_c == Approx(0.5));
  CHECK(rows[7].ps_speedup == Approx(8 * 0.5 / (0.5 + 3.904 - w)));
  // Hybrid at G = 8 (2 nodes): ⌈2·2·244e6/62.5e6⌉ = 16, capped at 2 nodes; exchange = the node
  // reduce + bcast 2·3/4·244e6/12e9 = 0.0305 s plus the PS term 3.904 s; half overlaps.
  CHECK(rows[7].hybrid_servers == 2);
  CHECK(rows[7].hybrid_pred.t_o == Approx(0.0305 + 3.904 - w));
  perf::Links ib;
  ib.intra = {12e9, 0};
  ib.inter = {12.5e9, 0};
  t = prediction_table(one_point(128, 0.5, 244e6, ib), 128, 2, 4, Placement::on_cluster());
  // 100 Gb/s: 2·8·244e6/(12.5e9·0.5) = 0.62 → 1 server; exchange max(2·8·244e6/12.5e9, 2·244e6/12.5e9)
  // = 0.31232 s. The pushes (0.15616 s) hide under backward but for the last 1 MiB bucket's
  // share; the pulls (0.15616 s) are paid (the old table said T_O = 0, S = G).
  const double ib_o = 0.15616 + 0.15616 * (1 << 20) / 244e6;
  CHECK(t.rows[7].sender_ok);
  CHECK(t.rows[7].ps_servers == 1);
  CHECK(t.rows[7].ps_pred.t_o == Approx(ib_o));
  CHECK(t.rows[7].ps_speedup == Approx(8 * 0.5 / (0.5 + ib_o)));
  // Allreduce: every bucket's ring runs as soon as it is ready, so T_O = max(ring − 2/3·T_C,
  // the last 1 MiB bucket's share of the ring).
  perf::RunShape ar = t.rows[7].allreduce;
  ar.param_bytes = 244e6;
  const double ring = perf::exchange_time(ar, ib);
  CHECK(t.rows[7].allreduce_pred.t_o == Approx(std::max(ring - w, ring * (1 << 20) / 244e6)));
  // The largest G with α ≥ 0.5 in ps mode: α = 0.5/(0.5 + max(2GP/(N_ps B), 2P/B)) with N_ps =
  // ⌈2GP/(B·T_C)⌉ keeps the exchange ≤ T_C, so α ≥ 0.5 at every G.
  CHECK(largest_workers(one_point(128, 0.5, 244e6, ib), 128, 4, dtrain::comm::Mode::ps, 0.5, Placement::on_cluster(), 512) == 512);
}

TEST_CASE("one prediction: the cluster and this machine differ only in the placement", "[tune]") {
  // LeNet-5-like: P = 0.25 MB, T_C1 samples 4 and 6 ms, shared-memory links 10 GB/s.
  perf::Links l;
  l.intra = l.inter = {10e9, 2e-6};
  Profile p = one_point(16, 0.005, 0.25e6, l);
  p.points[0].samples = {0.004, 0.006};
  p.points[0].process_t_c = {0.004, 0.006};
  p.points[0].time_share = 1.2;
  p.poll_period = 300e-6;
  p.poll_fraction = 0.05;
  const PredictionTable cluster = prediction_table(p, 16, 2, 2, Placement::on_cluster());
  const PredictionTable machine = prediction_table(p, 16, 2, 2, Placement::on_machine(2, 0.25));
  const TableRow& c = cluster.rows[3];
  const TableRow& m = machine.rows[3];
  // The old table's bug: T_O = max(0, exchange − T_C) = 0 and S = G for every layout. Now the
  // cluster's T_O is the exchange's exposed part (spinning waits, no hop wait): hybrid, 2 nodes
  // of 2. P = 0.25 MB is one bucket, which leaves only when backward ends: all of it exposed.
  REQUIRE(c.hybrid.servers == 1);
  perf::RunShape cs = c.hybrid;
  cs.param_bytes = p.param_bytes;
  cs.overlap = perf::kBackwardShare;
  CHECK(perf::exposed_exchange(perf::exchange_time(cs, l), 0.005, cs) == perf::exchange_time(cs, l));
  CHECK(c.hybrid_pred.t_o == Approx(perf::exchange_time(c.hybrid, l)).epsilon(1e-12));
  CHECK(c.hybrid_pred.t_o > 0);
  CHECK(c.hybrid_pred.t_c == Approx(0.005));  // the median, no stragglers, no time sharing
  CHECK(c.hybrid_speedup < 4.0);
  CHECK_FALSE(c.hybrid.sleeping_waits);
  // This machine: 5 ranks on 2 cores sleep (auto policy); the numbers are perf::predict_step
  // with the samples, η, the poll terms and the background — what dtrain report computes.
  CHECK(m.hybrid.sleeping_waits);
  perf::MachineLoad load;
  load.cores = 2;
  load.background = 0.25;
  load.time_share = 1.2;
  load.poll_period = 300e-6;
  load.poll_fraction = 0.05;
  perf::RunShape s = m.hybrid;
  s.param_bytes = p.param_bytes;
  const perf::StepPrediction want = perf::predict_step(p.points[0].samples, s, l, load);
  CHECK(m.hybrid_pred.t_step == want.t_step);
  CHECK(m.hybrid_pred.t_o == want.t_o);
  CHECK(m.hybrid_pred.t_step > c.hybrid_pred.t_step);  // 4 workers on 2 cores: time sharing
  CHECK(m.hybrid_speedup == predicted_speedup(p, 16, m.hybrid, Placement::on_machine(2, 0.25)));
  CHECK(machine.to_json()["rows"][3]["hybrid"]["step_s"].get<double>() == m.hybrid_pred.t_step);
  // The text says which table is which.
  CHECK_THAT(table_text(cluster, p, "1 CPU core(s)"), Catch::Matchers::Contains("hypothetical cluster, NOT this machine"));
  CHECK_THAT(table_text(machine, p, "1 CPU core(s)"), Catch::Matchers::Contains("on this machine"));
}

TEST_CASE("the local update T_U: added in allreduce mode only, and on both placements", "[tune]") {
  perf::Links l;
  l.intra = {10e9, 0};
  l.inter = {1.25e9, 0};
  Profile p = one_point(64, 0.278, 102e6, l);
  p.update_s = 0.07;
  perf::RunShape ar;
  ar.workers = 4;
  ar.ranks_per_node = 1;
  perf::RunShape ps = ar;
  ps.mode = dtrain::comm::Mode::ps;
  ps.servers = 2;
  const perf::StepPrediction a = predict_run(p, 64, ar, Placement::on_cluster());
  const perf::StepPrediction s = predict_run(p, 64, ps, Placement::on_cluster());
  CHECK(a.t_c == Approx(0.278 + 0.07));  // workers update locally after the exchange
  CHECK(s.t_c == Approx(0.278));         // the servers update (inside the exchange)
  // The overlap window is backward's share of the compute without the update: 2/3·0.278.
  const double ring = 2.0 * 3 / 4 * 102e6 / 1.25e9;
  CHECK(a.t_o == Approx(std::max(ring - 2.0 / 3.0 * 0.278, ring * (1 << 20) / 102e6)));
  // This machine: the samples carry T_U too, the exchange is not overlapped.
  const perf::StepPrediction m = predict_run(p, 64, ar, Placement::on_machine(8, 0));
  CHECK(m.t_c == Approx(0.278 + 0.07));
  CHECK(m.t_o == Approx(ring));
  // The profile keeps it; an old profile without it reads as 0; a negative one is refused.
  p.t_c_given = true;
  nlohmann::json j = p.to_json();
  CHECK(Profile::from_json(j).update_s == 0.07);
  CHECK(Profile::from_json(j).t_c_given);  // holds at any thread count (dtrain report)
  j["t_c_given"] = "yes";
  CHECK_THROWS_AS(Profile::from_json(j), dtrain::UsageError);
  j.erase("t_c_given");
  CHECK_FALSE(Profile::from_json(j).t_c_given);  // a profile from before the field: measured
  j.erase("update_s");
  CHECK(Profile::from_json(j).update_s == 0.0);
  j["update_s"] = -1;
  CHECK_THROWS_AS(Profile::from_json(j), dtrain::UsageError);
}

TEST_CASE("tuned job file reads back to the same configuration", "[tune]") {
  TrainConfig c;
  c.model = "resnet20";
  c.train_data = "data/fashion-mnist-train.h5";
  c.minibatch = 96;
  c.lr = 0.375f;
  c.mode = dtrain::comm::Mode::hybrid;
  c.ps = 2;
  c.ranks_per_node = 2;
  c.mean = {0.286f};
  c.std = {0.353f};
  c.decay_bias_bn = false;
  c.momentum = 0.9f;
  c.weight_decay = 5e-4f;
  c.metrics = "runs/x/metrics.jsonl";
  c.save_params = "runs/x/params.h5";
  const std::string text = job_file_text(c);
  // Shortest round-trip numbers and true/false (core/format.hpp); no output paths
  // (each run of the tuned job gets its own run folder).
  CHECK_THAT(text, Catch::Matchers::Contains("\nlr = 0.375\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("\nmomentum = 0.9\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("\nweight-decay = 5e-04\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("\nmean = 0.286\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("\ndecay-bias-bn = false\n"));
  CHECK_THAT(text, !Catch::Matchers::Contains("metrics"));
  CHECK_THAT(text, !Catch::Matchers::Contains("save-params"));
  const std::string path = "test_tune_job.ini";
  {
    std::ofstream f(path);
    f << text;
  }
  TrainConfig r;
  REQUIRE(parse_train_args({"--job", path}, r));
  CHECK(r.model == "resnet20");
  CHECK(r.train_data == c.train_data);
  CHECK(r.minibatch == 96);
  CHECK(r.lr == Approx(0.375f));
  CHECK(r.mode == dtrain::comm::Mode::hybrid);
  CHECK(r.ps == 2);
  CHECK(r.ranks_per_node == 2);
  REQUIRE(r.mean.size() == 1);
  CHECK(r.mean[0] == Approx(0.286f));
  REQUIRE(r.std.size() == 1);
  CHECK(r.std[0] == Approx(0.353f));
  CHECK_FALSE(r.decay_bias_bn);
  CHECK(r.momentum == 0.9f);
  CHECK(r.weight_decay == 5e-4f);
  CHECK(r.mean[0] == 0.286f);
  CHECK(r.metrics == "auto");  // not written: the trainer's default run folder
  CHECK(r.save_params == "auto");
  CHECK_THAT(text, !Catch::Matchers::Contains("lr-milestones"));  // none set: no line
  std::remove(path.c_str());
}

TEST_CASE("tuned job file keeps the step schedule's milestones", "[tune]") {
  TrainConfig c;
  c.train_data = "data/imagenet-train.h5";
  c.lr_schedule = dtrain::layers::LrSchedule::Kind::step;
  c.lr_milestones = {30.0f, 60.0f, 80.0f};
  c.warmup_epochs = 5.0f;
  const std::string text = job_file_text(c);
  CHECK_THAT(text, Catch::Matchers::Contains("\nlr-milestones = 30,60,80\n"));
  CHECK_THAT(text, Catch::Matchers::Contains("\nlr-step-epochs = 0\n"));  // 0: not set
  const std::string path = "test_tune_milestones.ini";
  {
    std::ofstream f(path);
    f << text;
  }
  TrainConfig r;
  REQUIRE(parse_train_args({"--job", path}, r));
  CHECK(r.lr_schedule == dtrain::layers::LrSchedule::Kind::step);
  CHECK(r.lr_milestones == c.lr_milestones);
  CHECK(r.warmup_epochs == 5.0f);
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
  refused([](auto& b) { b["param_bytes"] = 0.0; }, "param_bytes");
  refused([](auto& b) { b["kind"] = "other"; }, "not \"profile\"");
  refused([](auto& b) { b.erase("model"); }, "model is missing");
  refused([](auto& b) { b = nlohmann::json::array({1, 2}); }, "not a JSON object");
  // An empty profile built in code: a usage error too, not an internal check.
  Profile empty;
  REQUIRE_THROWS_AS(empty.t_c_at(8), dtrain::UsageError);
  REQUIRE_THROWS_AS(empty.samples_at(8), dtrain::UsageError);
  REQUIRE_THROWS_AS(empty.time_share_at(8), dtrain::UsageError);
}

TEST_CASE("tuned outputs: a name that appeared since the check is refused, not replaced", "[tune]") {
  // Two tunes with the same --out both passed the check before profiling; the
  // later writer replaced the earlier one's files. The move into place now
  // refuses a name that exists (exit 2, naming it) unless --overwrite.
  using dtrain::test::TempDir;
  using dtrain::test::usage_error_message;
  namespace fs = std::filesystem;
  auto read = [](const std::string& p) {
    std::ifstream f(p);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  auto put = [](const std::string& p, const std::string& text) { std::ofstream(p) << text; };
  TempDir dir;
  const std::string out = dir.file("t.ini"), profile = out + ".profile.json";
  SECTION("the job file appeared: refused, the profile of this run removed again") {
    put(out, "theirs\n");
    const std::string msg = usage_error_message([&] { write_tune_outputs(out, "job\n", "{}\n", false); });
    CHECK_THAT(msg, Catch::Matchers::Contains("option 'out'") && Catch::Matchers::Contains("'" + out + "'") &&
                        Catch::Matchers::Contains("--overwrite"));
    CHECK(read(out) == "theirs\n");
    CHECK_FALSE(fs::exists(profile));
  }
  SECTION("the profile appeared: refused, no job file written") {
    put(profile, "theirs\n");
    const std::string msg = usage_error_message([&] { write_tune_outputs(out, "job\n", "{}\n", false); });
    CHECK_THAT(msg, Catch::Matchers::Contains("'" + profile + "'"));
    CHECK(read(profile) == "theirs\n");
    CHECK_FALSE(fs::exists(out));
  }
  SECTION("with overwrite both are replaced") {
    put(out, "theirs\n");
    put(profile, "theirs\n");
    write_tune_outputs(out, "job\n", "{}\n", true);
    CHECK(read(out) == "job\n");
    CHECK(read(profile) == "{}\n");
  }
  SECTION("a new name: both written") {
    write_tune_outputs(out, "job\n", "{}\n", false);
    CHECK(read(out) == "job\n");
    CHECK(read(profile) == "{}\n");
  }
  CHECK(dtrain::test::count_temp_files(dir.path()) == 0);
}

// 64 images 28×28×1 of 10 classes in DIR/small.h5 (the check_tune_job cases).
static std::string small_dataset(const dtrain::test::TempDir& dir) {
  const std::string data = dir.file("small.h5");
  const int64_t n = 64;
  std::vector<uint8_t> images(static_cast<size_t>(n * 28 * 28), 7);
  std::vector<int32_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) labels[size_t(i)] = int32_t(i % 10);
  dtrain::io::write_dataset(data, images, n, 28, 28, 1, labels, 10);
  return data;
}

TEST_CASE("tune checks the job's data against its model in what-if mode too, as train does", "[tune]") {
  // `dtrain tune --t-c-ms X` profiles nothing, and the data/model check lived
  // in the profiling: it wrote an AlexNet job for 28×28×1 images that train
  // refused. check_tune_job runs train's check (engine/train_job.hpp) first.
  using dtrain::test::TempDir;
  using dtrain::test::usage_error_message;
  TempDir dir;
  const std::string data = small_dataset(dir);
  TuneOptions t;
  t.t_c_ms = 51.2;  // what-if
  t.candidates = {16};
  TrainConfig cfg;
  REQUIRE(parse_train_args({"--model", "alexnet", "--train-data", data, "--minibatch", "16"}, cfg));
  const std::string msg = usage_error_message([&] { check_tune_job(t, cfg); });
  CHECK_THAT(msg, Catch::Matchers::Contains("option 'train-data'") && Catch::Matchers::Contains(data) &&
                      Catch::Matchers::Contains("28×28×1") && Catch::Matchers::Contains("227×227×3"));
  // The same in measuring mode, before profiling; a model the images fit passes.
  t.t_c_ms = 0;
  CHECK_THAT(usage_error_message([&] { check_tune_job(t, cfg); }), Catch::Matchers::Contains("227×227×3"));
  TrainConfig fits;
  REQUIRE(parse_train_args({"--model", "lenet5", "--train-data", data, "--minibatch", "16"}, fits));
  CHECK(check_tune_job(t, fits) == 10);
}

TEST_CASE("tune refuses a stand-in job and values the tuned job file would read back otherwise", "[tune]") {
  // A job with compute-stand-in-ms was profiled on the model's real compute and
  // written back with the stand-in (a fixed time per step, whatever the
  // minibatch); a data path ending in a space was written to the job file,
  // which reads values trimmed: the tuned job named another file.
  using dtrain::test::TempDir;
  using dtrain::test::usage_error_message;
  TempDir dir;
  const std::string data = small_dataset(dir);
  TuneOptions t;
  t.candidates = {16};
  TrainConfig stand_in;
  REQUIRE(parse_train_args({"--model", "lenet5", "--train-data", data, "--compute-stand-in-ms", "12.5"}, stand_in));
  for (const double t_c_ms : {0.0, 51.2}) {
    t.t_c_ms = t_c_ms;
    const std::string msg = usage_error_message([&] { check_tune_job(t, stand_in); });
    CHECK_THAT(msg, Catch::Matchers::Contains("option 'compute-stand-in-ms'") && Catch::Matchers::Contains("12.5") &&
                        Catch::Matchers::Contains("--compute-stand-in-ms 0 --t-c-ms 12.5"));
  }
  t.t_c_ms = 0;
  TrainConfig real;  // the command line's 0 wins over the job file's value
  REQUIRE(parse_train_args({"--model", "lenet5", "--train-data", data, "--compute-stand-in-ms", "0"}, real));
  CHECK(check_tune_job(t, real) == 10);
  // A training file whose name ends with a space or a tab.
  for (const std::string name : {"small.h5 ", "small.h5\t"}) {
    const std::string odd = dir.file(name);
    std::filesystem::copy_file(data, odd);
    TrainConfig cfg;
    REQUIRE(parse_train_args({"--model", "lenet5", "--train-data", odd}, cfg));
    CHECK_THAT(usage_error_message([&] { check_tune_job(t, cfg); }),
               Catch::Matchers::Contains("option 'train-data'") && Catch::Matchers::Contains("white space"));
  }
}

TEST_CASE("tune: --intra-gbps is checked like --link-gbps", "[tune]") {
  // -5 and nan were taken as 0 ("measure") without a word; link-gbps refused them.
  // --t-u-ms without --t-c-ms is refused later in the same checks: a value let
  // through shows as that message instead.
  using dtrain::test::usage_error_message;
  for (const char* v : {"-5", "nan", "inf", "-inf"}) {
    INFO("--intra-gbps " << v);
    const std::string msg =
        usage_error_message([&] { cmd_tune({"--model", "lenet5", "--intra-gbps", v, "--t-u-ms", "1"}); });
    CHECK_THAT(msg, Catch::Matchers::Contains("option 'intra-gbps'") && Catch::Matchers::Contains(v));
  }
  // 0 keeps its meaning (measure); a positive figure passes.
  for (const char* v : {"0", "12.5"}) {
    INFO("--intra-gbps " << v);
    const std::string msg =
        usage_error_message([&] { cmd_tune({"--model", "lenet5", "--intra-gbps", v, "--t-u-ms", "1"}); });
    CHECK_THAT(msg, Catch::Matchers::Contains("option 't-u-ms' needs 't-c-ms'"));
  }
}
