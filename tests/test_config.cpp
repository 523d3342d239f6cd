// tests/test_config.cpp — job file + command line parsing and its errors.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.hpp"
#include "engine/config.hpp"
#include "engine/options.hpp"
#include "engine/train_job.hpp"
#include "tests/config_test_util.hpp"

using dtrain::engine::TrainConfig;
using dtrain::engine::parse_train_args;

namespace {
std::string write_job(const std::string& name, const std::string& text) {
  auto p = std::filesystem::temp_directory_path() / ("dtrain_test_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p) << text;
  return p.string();
}
using dtrain::test::usage_message;
}  // namespace

TEST_CASE("job file values, command-line overrides", "[config]") {
  std::string job = write_job("ok.ini",
                              "# a comment\nmodel = resnet20\ntrain-data = a.h5\ntest-data = b.h5\n"
                              "minibatch = 32\nlr = 0.05\nmean = 0.5\nstd = 0.25\nweight-decay = 5e-4\n"
                              "decay-bias-bn = false\nlr-schedule = cosine\n");
  TrainConfig c;
  REQUIRE(parse_train_args({"--job", job, "--minibatch", "16"}, c));
  CHECK(c.model == "resnet20");
  CHECK(c.train_data == "a.h5");
  CHECK(c.minibatch == 16);  // the command line wins
  CHECK(c.lr == Approx(0.05f));
  CHECK(c.mean == std::vector<float>{0.5f});
  CHECK(c.std == std::vector<float>{0.25f});
  CHECK(c.weight_decay == Approx(5e-4f));
  CHECK_FALSE(c.decay_bias_bn);
  CHECK(c.lr_schedule == dtrain::layers::LrSchedule::Kind::cosine);
  CHECK(c.epochs == 10);  // default
}

// Two job-file mistakes a helper found (2026-12-04): a byte-order mark made the
// first key "unknown" with the mark invisible; a `job` key was silently ignored.
TEST_CASE("a job file with a byte-order mark reads, one naming another job file is refused", "[config]") {
  TrainConfig c;
  REQUIRE(parse_train_args({"--job", write_job("bom.ini", "\xEF\xBB\xBFmodel = resnet20\ntrain-data = a.h5\n")}, c));
  CHECK(c.model == "resnet20");
  const std::string inner = write_job("inner.ini", "lr = 0.5\n");
  const std::string outer = write_job("outer.ini", "train-data = a.h5\njob = " + inner + "\n");
  const std::string m = usage_message({"--job", outer});
  CHECK_THAT(m, Catch::Contains(outer) && Catch::Contains("key 'job'") && Catch::Contains("cannot name another"));
}

TEST_CASE("bad jobs are usage errors naming the key", "[config]") {
  std::string unknown = write_job("unknown.ini", "train-data = a.h5\nminibath = 3\n");
  std::string m = usage_message({"--job", unknown});
  CHECK_THAT(m, Catch::Contains("minibath"));
  CHECK_THAT(m, Catch::Contains(unknown));

  std::string bad = write_job("bad.ini", "train-data = a.h5\nminibatch = many\n");
  CHECK_THAT(usage_message({"--job", bad}), Catch::Contains("minibatch"));

  CHECK_THAT(usage_message({"--train-data", "a.h5", "--minibatch", "0"}), Catch::Contains("minibatch"));
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--lr", "-1"}), Catch::Contains("'lr'"));
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--momentum", "1.5"}), Catch::Contains("momentum"));
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--device", "tpu"}), Catch::Contains("device"));
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--lr-schedule", "linear"}), Catch::Contains("lr-schedule"));
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--mean", "0.1,x"}), Catch::Contains("mean"));
  CHECK_THAT(usage_message({"--minibatch", "8"}), Catch::Contains("train-data"));
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--no-such-option", "1"}), Catch::Contains("no-such-option"));
  CHECK_THAT(usage_message({"--job", "/nonexistent/job.ini"}), Catch::Contains("/nonexistent/job.ini"));
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--mode", "gossip"}), Catch::Contains("mode"));
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--mode", "ps"}), Catch::Contains("'ps'"));
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--ps", "1"}), Catch::Contains("'ps'"));
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--ranks-per-node", "-1"}), Catch::Contains("ranks-per-node"));
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--max-chunk-elems", "0"}), Catch::Contains("max-chunk-elems"));
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--save-params", "--metrics", "m.jsonl"}),
             Catch::Contains("option 'save-params' got the value '--metrics', which looks like an option"));
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--max-chunk-elems", "1023"}),
             Catch::Contains("max-chunk-elems") && Catch::Contains("[1024, 2^31), got 1023"));
}

TEST_CASE("an unknown option or key names the nearest valid one", "[config]") {
  CHECK_THAT(usage_message({"--train-data", "x.h5", "--minibtach", "16"}),
             Catch::Contains("'--minibtach' (did you mean --minibatch?)"));
  CHECK_THAT(usage_message({"--train-data", "x.h5", "--lr-shedule", "step"}),
             Catch::Contains("(did you mean --lr-schedule?)"));
  CHECK_THAT(usage_message({"--train-data", "x.h5", "--mini", "16"}), Catch::Contains("(did you mean --minibatch?)"));
  // Nothing close: no suggestion rather than a wrong one.
  CHECK_THAT(usage_message({"--train-data", "x.h5", "--frobnicate", "1"}), !Catch::Contains("did you mean"));
  CHECK_THAT(usage_message({"--train-data", "x.h5", "--frob", "1"}), !Catch::Contains("did you mean"));  // not --job
  const std::string job = write_job("typo.ini", "model = lenet5\nmomentun = 0.9\n");
  CHECK_THAT(usage_message({"--job", job, "--train-data", "x.h5"}), Catch::Contains("(did you mean key 'momentum'?)"));
  const std::string upper = write_job("upper.ini", "model = lenet5\nLR = 0.1\n");  // case does not count
  CHECK_THAT(usage_message({"--job", upper, "--train-data", "x.h5"}), Catch::Contains("(did you mean key 'lr'?)"));
  std::filesystem::remove(upper);
  std::filesystem::remove(job);
}

// Boost said "is invalid" alike for "abc" and for a number out of the type's
// range (a helper's finding: --lr 1e300), and read `--lr 1e-50` as 0 ("must be
// > 0, got 0", a value nobody typed) and `--comm-timeout 1e-5000` as 0 (no
// timeout, taken): every numeric value is read first as typed and refused
// naming it and what is wrong with it (engine/options.hpp refuse_bad_numbers).
TEST_CASE("a numeric value is refused as typed with what is wrong with it", "[config]") {
  auto cli = [](const char* key, const char* value) {
    return usage_message({"--train-data", "x.h5", std::string("--") + key, value});
  };
  CHECK_THAT(cli("lr", "1e300"),
             Catch::Contains("command line: option 'lr' got '1e300', which is beyond a float's largest magnitude (3.4e38)"));
  CHECK_THAT(cli("lr", "1e-50"),
             Catch::Contains("option 'lr' got '1e-50', which a float holds as 0 (its smallest nonzero magnitude is 1.4e-45)"));
  CHECK_THAT(cli("lr", "1e-5000"), Catch::Contains("option 'lr' got '1e-5000', which a float holds as 0"));
  CHECK_THAT(cli("comm-timeout", "1e-5000"), Catch::Contains("option 'comm-timeout' got '1e-5000', which a double holds as 0"));
  CHECK_THAT(cli("heartbeat-timeout", "1e-400"), Catch::Contains("which a double holds as 0"));
  CHECK_THAT(cli("weight-decay", "-1e-60"), Catch::Contains("option 'weight-decay' got '-1e-60', which a float holds as 0"));
  for (const char* junk : {"0.01f", "0x1p-3", " 0.01", "1e", ".", "1,5", "abc", ""})
    CHECK_THAT(cli("lr", junk), Catch::Contains("option 'lr' got '" + std::string(junk) + "', which is not a decimal number"));
  CHECK_THAT(cli("minibatch", "99999999999"),
             Catch::Contains("option 'minibatch' got '99999999999', which is beyond the range of its type (-2147483648 to 2147483647)"));
  CHECK_THAT(cli("minibatch", "1.5"), Catch::Contains("option 'minibatch' got '1.5', which is not an integer"));
  CHECK_THAT(cli("minibatch", "0x10"), Catch::Contains("which is not an integer"));
  // Invisible bytes pasted after a value are spelled out (a form feed, a no-break space).
  CHECK_THAT(cli("lr", "0.05\f"), Catch::Contains("option 'lr' got '0.05\\x0c', which is not a decimal number"));
  CHECK_THAT(cli("minibatch", "16\xc2\xa0"), Catch::Contains("got '16\\xc2\\xa0', which is not an integer"));
  // inf and nan are numbers: validate() refuses them where a finite one is needed.
  CHECK_THAT(cli("lr", "nan"), Catch::Contains("option 'lr': must be a finite number > 0, got nan"));
  // Zero itself, a subnormal, a sign, the largest float and integers with a sign or leading zeros pass.
  TrainConfig c;
  REQUIRE(parse_train_args({"--train-data", "x.h5", "--weight-decay", "0e-5000", "--lr", "1e-40", "--momentum", "+.5",
                            "--clip-grad-norm", "3.4028235e38", "--epochs", "+3", "--log-interval", "010"},
                           c));
  CHECK(c.weight_decay == 0.0f);
  CHECK(c.lr > 0.0f);
  CHECK(c.momentum == 0.5f);
  CHECK(c.epochs == 3);
  CHECK(c.log_interval == 10);
  // A job file's values alike, also where the command line overrides the key.
  const std::string job = write_job("range.ini", "model = lenet5\nlr = 1e39\n");
  CHECK_THAT(usage_message({"--job", job, "--train-data", "x.h5"}),
             Catch::Contains("job file '" + job + "': option 'lr' got '1e39', which is beyond a float's largest magnitude"));
  CHECK_THAT(usage_message({"--job", job, "--train-data", "x.h5", "--lr", "0.01"}),
             Catch::Contains("job file '" + job + "': option 'lr' got '1e39'"));
  std::filesystem::remove(job);
  const std::string tiny = write_job("tiny.ini", "model = lenet5\nlr = 1e-50\n");
  CHECK_THAT(usage_message({"--job", tiny, "--train-data", "x.h5"}),
             Catch::Contains("job file '" + tiny + "': option 'lr' got '1e-50', which a float holds as 0"));
  std::filesystem::remove(tiny);
}

TEST_CASE("list and range values are read as the single numbers are", "[config]") {
  CHECK_THAT(usage_message({"--train-data", "x.h5", "--mean", "1e-50"}),
             Catch::Contains("option 'mean': '1e-50', which a float holds as 0"));
  CHECK_THAT(usage_message({"--train-data", "x.h5", "--std", "0.5,1e39"}),
             Catch::Contains("option 'std': '1e39' in '0.5,1e39', which is beyond a float's largest magnitude"));
  CHECK_THAT(usage_message({"--train-data", "x.h5", "--mean", "0x10"}),
             Catch::Contains("option 'mean': '0x10' is not a comma-separated list of decimal numbers"));
  CHECK_THAT(usage_message({"--train-data", "x.h5", "--mean", "0.5,"}), Catch::Contains("'0.5,' has an empty item"));
  CHECK_THAT(usage_message({"--train-data", "x.h5", "--rrc-scale", "1e-400,1"}),
             Catch::Contains("option 'rrc-scale': '1e-400' in '1e-400,1', which a double holds as 0"));
  CHECK_THAT(usage_message({"--train-data", "x.h5", "--rrc-scale", "a,1"}), Catch::Contains("is not a range MIN,MAX"));
  // A float subnormal is a float; spaces around items (a job file's "0.5, 0.4") are allowed.
  TrainConfig c;
  REQUIRE(parse_train_args({"--train-data", "x.h5", "--std", "1e-40", "--rrc-scale", "0.08, 1", "--lr-milestones",
                            " 30, 60 ", "--lr-schedule", "step"},
                           c));
  REQUIRE(c.std.size() == 1);
  CHECK(c.std[0] > 0.0f);
  CHECK(c.rrc_scale_min == Approx(0.08));
  CHECK(c.lr_milestones == std::vector<float>{30.0f, 60.0f});
}

// A number the type holds exactly is printed as typed: 4096.0000000001 read
// "got 4096", inside the range it was refused for; NaN named no value at all.
TEST_CASE("a refused bucket-mb names the value as typed", "[config]") {
  CHECK_THAT(usage_message({"--train-data", "x.h5", "--bucket-mb", "4096.0000000001"}),
             Catch::Contains("option 'bucket-mb': must be a number of MiB from 1 byte (9.5e-07) to 4096, got 4096.0000000001"));
  CHECK_THAT(usage_message({"--train-data", "x.h5", "--bucket-mb", "nan"}), Catch::Contains("to 4096, got nan"));
  // Below 1 byte: refused here, not by the exchange after the run folder was made.
  CHECK_THAT(usage_message({"--train-data", "x.h5", "--bucket-mb", "1e-9"}), Catch::Contains("to 4096, got 1e-09"));
  CHECK_THAT(usage_message({"--train-data", "x.h5", "--comm-timeout", "-1"}), Catch::Contains("got -1"));
}

TEST_CASE("nearest_option: transpositions count one edit, distant names get nothing", "[config]") {
  namespace po = boost::program_options;
  po::options_description d;
  d.add_options()("minibatch", "")("epochs", "")("eval-minibatch", "")("lr", "");
  CHECK(dtrain::engine::nearest_option("--minibtach", d) == "minibatch");
  CHECK(dtrain::engine::nearest_option("epoch", d) == "epochs");
  CHECK(dtrain::engine::nearest_option("--eval-minibtch=3", d) == "eval-minibatch");
  CHECK(dtrain::engine::nearest_option("--zzzzzzzz", d).empty());
}

TEST_CASE("list_items: trimmed items, empty ones kept for the caller to refuse", "[config]") {
  using dtrain::engine::list_items;
  using V = std::vector<std::string>;
  CHECK(list_items("0.5, 0.4") == V{"0.5", "0.4"});
  CHECK(list_items(" 16 ,\t32\t") == V{"16", "32"});
  CHECK(list_items("16,32,") == V{"16", "32", ""});
  CHECK(list_items("0.5,,1") == V{"0.5", "", "1"});
  CHECK(list_items("") == V{""});
  CHECK(list_items("1\f") == V{"1\f"});  // only spaces and tabs: a form feed stays to be shown as \x0c
  CHECK(dtrain::engine::trim_blanks(" \t3 / 4\t ") == "3 / 4");
  CHECK(dtrain::engine::trim_blanks(" \t ").empty());
}

TEST_CASE("outputs default to the run folder, help shows readable defaults", "[config]") {
  TrainConfig c;
  REQUIRE(parse_train_args({"--train-data", "x.h5"}, c));
  CHECK(c.metrics == "auto");
  CHECK(c.save_params == "auto");
  CHECK(c.runs_dir == "runs");
  CHECK_FALSE(c.overwrite);
  CHECK_FALSE(c.metrics_append);
  TrainConfig a;
  REQUIRE(parse_train_args({"--train-data", "x.h5", "--metrics", "m.jsonl", "--metrics-append", "true"}, a));
  CHECK(a.metrics_append);
  const std::string help = dtrain::engine::train_help();
  CHECK_THAT(help, Catch::Contains("--lr arg (=0.01)"));
  CHECK_THAT(help, Catch::Contains("--momentum arg (=0.9)"));
  CHECK_THAT(help, Catch::Contains("--decay-bias-bn arg (=true)"));
  CHECK_THAT(help, !Catch::Contains("0.00999999"));
}

TEST_CASE("enum-valued keys are parsed once: every option string round-trips, a bad one names the key",
          "[config]") {
  using dtrain::comm::Mode;
  using dtrain::comm::WaitPolicy;
  using Kind = dtrain::layers::LrSchedule::Kind;
  namespace e = dtrain::engine;
  TrainConfig d;
  REQUIRE(parse_train_args({"--train-data", "x.h5"}, d));
  CHECK(d.device == e::Device::cpu);
  CHECK(d.mode == Mode::allreduce);
  CHECK(d.lr_schedule == Kind::constant);
  CHECK_FALSE(d.wait_policy.has_value());  // auto
  for (e::Device v : {e::Device::cpu, e::Device::cpu_staged}) {
    TrainConfig c;
    REQUIRE(parse_train_args({"--train-data", "x.h5", "--device", e::device_name(v)}, c));
    CHECK(c.device == v);
  }
  CHECK(std::string(e::device_name(e::Device::cpu_staged)) == "cpu-staged");
  for (Kind v : {Kind::constant, Kind::step, Kind::cosine}) {
    TrainConfig c;
    REQUIRE(parse_train_args({"--train-data", "x.h5", "--lr-step-epochs", "1", "--lr-schedule", e::lr_schedule_name(v)}, c));
    CHECK(c.lr_schedule == v);
  }
  for (std::optional<WaitPolicy> v : {std::optional<WaitPolicy>(WaitPolicy::spin),
                                      std::optional<WaitPolicy>(WaitPolicy::sleep), std::optional<WaitPolicy>()}) {
    TrainConfig c;
    REQUIRE(parse_train_args({"--train-data", "x.h5", "--wait-policy", e::wait_policy_option(v)}, c));
    CHECK(c.wait_policy == v);
  }
  TrainConfig h;
  REQUIRE(parse_train_args({"--train-data", "x.h5", "--mode", "hybrid", "--ps", "1"}, h));
  CHECK(h.mode == Mode::hybrid);
  CHECK(usage_message({"--train-data", "x.h5", "--mode", "gossip"}) ==
        "command line: option 'mode': 'gossip' is not allreduce, ps or hybrid");
  CHECK(usage_message({"--train-data", "x.h5", "--device", "tpu"}) ==
        "command line: option 'device': 'tpu' is not cpu, cuda or cpu-staged");
  CHECK(usage_message({"--train-data", "x.h5", "--wait-policy", "busy"}) ==
        "command line: option 'wait-policy': 'busy' is not spin, sleep or auto");
  CHECK(usage_message({"--train-data", "x.h5", "--lr-schedule", "linear"}) ==
        "command line: option 'lr-schedule': 'linear' is not constant, step or cosine");
  const std::string help = e::train_help();
  CHECK_THAT(help, Catch::Contains("--mode arg (=allreduce)"));
  CHECK_THAT(help, Catch::Contains("--wait-policy arg (=auto)"));
  CHECK_THAT(help, Catch::Contains("--device arg (=cpu)"));
}

TEST_CASE("lr-milestones: increasing epochs > 0, exactly one of it and lr-step-epochs for the step schedule",
          "[config]") {
  using Kind = dtrain::layers::LrSchedule::Kind;
  TrainConfig c;
  REQUIRE(parse_train_args({"--train-data", "x.h5", "--lr-schedule", "step", "--lr-milestones", "30,60,80"}, c));
  CHECK(c.lr_schedule == Kind::step);
  CHECK(c.lr_milestones == std::vector<float>{30.0f, 60.0f, 80.0f});
  CHECK(c.lr_step_epochs == 0.0f);
  TrainConfig f;  // fractional epochs, as lr-step-epochs takes them
  REQUIRE(parse_train_args({"--train-data", "x.h5", "--lr-schedule", "step", "--lr-milestones", "0.5,19.98"}, f));
  CHECK(f.lr_milestones == std::vector<float>{0.5f, 19.98f});

  const std::vector<std::string> step = {"--train-data", "x.h5", "--lr-schedule", "step"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = step;
    a.insert(a.end(), more.begin(), more.end());
    return usage_message(a);
  };
  const std::string both = with({"--lr-milestones", "30,60", "--lr-step-epochs", "30"});
  CHECK_THAT(both, Catch::Contains("'lr-milestones'"));
  CHECK_THAT(both, Catch::Contains("lr-step-epochs = 30"));
  const std::string neither = with({});
  CHECK_THAT(neither, Catch::Contains("'lr-step-epochs'"));
  CHECK_THAT(neither, Catch::Contains("lr-milestones"));
  CHECK_THAT(with({"--lr-milestones", "60,30"}), Catch::Contains("'lr-milestones': must be increasing, got '60,30'"));
  CHECK_THAT(with({"--lr-milestones", "30,30"}), Catch::Contains("must be increasing"));
  CHECK_THAT(with({"--lr-milestones", "0,30"}), Catch::Contains("'lr-milestones'"));
  CHECK_THAT(with({"--lr-milestones", "-5"}), Catch::Contains("'lr-milestones'"));
  CHECK_THAT(with({"--lr-milestones", "30,x"}), Catch::Contains("'lr-milestones'"));
  CHECK_THAT(with({"--lr-milestones", "nan"}), Catch::Contains("'lr-milestones'"));

  // A job file's milestones give way to the command line's lr-step-epochs when
  // the command line clears them ("" = not set), and the other way round.
  const std::string job = write_job("milestones.ini", "train-data = a.h5\nlr-schedule = step\nlr-milestones = 30,60,80\n");
  TrainConfig j;
  REQUIRE(parse_train_args({"--job", job}, j));
  CHECK(j.lr_milestones.size() == 3);
  CHECK_THAT(usage_message({"--job", job, "--lr-step-epochs", "30"}), Catch::Contains("--lr-milestones \"\""));
  TrainConfig k;
  REQUIRE(parse_train_args({"--job", job, "--lr-milestones", "", "--lr-step-epochs", "30"}, k));
  CHECK(k.lr_milestones.empty());
  CHECK(k.lr_step_epochs == 30.0f);
  // Other schedules ignore both (as they ignore lr-step-epochs), but the list must still be valid.
  TrainConfig cos;
  REQUIRE(parse_train_args({"--job", job, "--lr-schedule", "cosine"}, cos));
  CHECK(cos.lr_schedule == Kind::cosine);
  CHECK_THAT(usage_message({"--train-data", "x.h5", "--lr-milestones", "9,3"}), Catch::Contains("lr-milestones"));
  std::filesystem::remove(job);
}

TEST_CASE("default thread counts follow the rank's share of its CPU set", "[config]") {
  if (std::getenv("SLURM_CPUS_PER_TASK")) {
    WARN("SLURM_CPUS_PER_TASK is set: the task's CPUs decide, the share is not used");
    return;
  }
  TrainConfig cfg;
  // A rank bound to one core (mpirun's default for 1 or 2 ranks, or taskset -c N): one
  // compute thread and one loader, whatever the host's core count.
  auto one = dtrain::engine::choose_thread_counts(cfg, 1, 1);
  CHECK(one.compute == 1);
  CHECK(one.loaders == 1);
  // Four CPUs of its own: four compute threads, loaders at most four.
  auto four = dtrain::engine::choose_thread_counts(cfg, 2, 4);
  CHECK(four.compute == 4);
  CHECK(four.loaders >= 1);
  CHECK(four.loaders <= 4);
  // The job's own counts win over the share.
  cfg.threads = 3;
  cfg.loader_threads = 2;
  auto fixed = dtrain::engine::choose_thread_counts(cfg, 1, 1);
  CHECK(fixed.compute == 3);
  CHECK(fixed.loaders == 2);
  // No share known (the report's prediction): the host's cores over its ranks.
  cfg.threads = 0;
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  CHECK(dtrain::engine::choose_thread_counts(cfg, 1, 0).compute == hw);
  CHECK(dtrain::engine::choose_thread_counts(cfg, 1 << 20, 0).compute == 1);
}

TEST_CASE("a value refused by the checks after parsing names where it was written", "[config]") {
  const std::string job = write_job("momentum.ini", "train-data = a.h5\nmomentum = 1.5\nmean = 0.5,\n");
  // The job file's value: the message names the file.
  CHECK_THAT(usage_message({"--job", job, "--mean", "0.5"}),
             Catch::StartsWith("job file '" + job + "': option 'momentum': must be in [0, 1), got 1.5"));
  // The command line's value wins and is the one named.
  CHECK_THAT(usage_message({"--job", job, "--mean", "0.5", "--momentum", "1.7"}),
             Catch::StartsWith("command line: option 'momentum': must be in [0, 1), got 1.7"));
  // A list key read after parsing (mean) alike.
  CHECK_THAT(usage_message({"--job", job}), Catch::StartsWith("job file '" + job + "': option 'mean': '0.5,'"));
  CHECK_THAT(usage_message({"--train-data", "a.h5", "--mode", "mesh"}),
             Catch::StartsWith("command line: option 'mode': 'mesh' is not allreduce, ps or hybrid"));
  // A key given nowhere has no origin to name.
  const std::string bare = write_job("bare.ini", "model = lenet5\n");
  CHECK_THAT(usage_message({"--job", bare}), Catch::StartsWith("option 'train-data': is required"));
  std::filesystem::remove(job);
  std::filesystem::remove(bare);
}

TEST_CASE("a section header in a job file is refused as one with its line", "[config]") {
  const std::string job = write_job("section.ini", "# a job\nmodel = lenet5\n  [train]\ntrain-data = a.h5\n");
  CHECK_THAT(usage_message({"--job", job}),
             Catch::StartsWith("job file '" + job + "': line 3: '[train]' is a section header; job files have no "
                               "sections"));
  // A CRLF file's header alike; "[a] = 1" and
  // "[train" are no sections to Boost, and not called one (Boost names them).
  const std::string crlf = write_job("crlf.ini", "model = lenet5\r\n  [train] \r\ntrain-data = a.h5\r\n");
  CHECK_THAT(usage_message({"--job", crlf}), Catch::StartsWith("job file '" + crlf + "': line 2: '[train]' is a section"));
  const std::string key = write_job("bracketkey.ini", "[a] = 1\ntrain-data = a.h5\n");
  CHECK_THAT(usage_message({"--job", key}), !Catch::Contains("section header"));
  const std::string comment = write_job("comment.ini", "model = lenet5\n[train] # the section\nlr = 0.1\n");
  CHECK_THAT(usage_message({"--job", comment}), Catch::StartsWith("job file '" + comment + "': line 2: '[train]' is a section"));
  std::filesystem::remove(comment);
  const std::string open = write_job("open.ini", "[train\ntrain-data = a.h5\n");
  CHECK_THAT(usage_message({"--job", open}), !Catch::Contains("section header"));
  for (const auto& f : {job, crlf, key, open}) std::filesystem::remove(f);
}

TEST_CASE("a job file line that is not key = value is refused with its number, shown visibly", "[config]") {
  // Boost said "the options configuration file contains an invalid line '<raw form feed>[x]'", no line.
  const std::string ff = write_job("formfeed.ini", "model = lenet5\n\f[x]\nlr = 0.1\n");
  CHECK(usage_message({"--job", ff}) == "job file '" + ff + "': line 2 holds the control character \\x0c: '\\x0c[x]' "
                                         "(a job file is text: key = value lines)");
  const std::string noeq = write_job("noeq.ini", "model = lenet5\n\n  lr 0.1  # the rate\n");
  CHECK(usage_message({"--job", noeq}) == "job file '" + noeq + "': line 3: 'lr 0.1' is not key = value (a comment starts with #)");
  // Boost said "unrecognised option" with an empty name.
  const std::string nokey = write_job("nokey.ini", "model = lenet5\n = 16\n");
  CHECK(usage_message({"--job", nokey}) == "job file '" + nokey + "': line 2: '= 16' has no key before '='");
  // A 200 KB line was echoed whole: 120 bytes of it, and its length.
  const std::string longline = write_job("long.ini", "model = lenet5\n" + std::string(200000, 'x') + "\n");
  const std::string m = usage_message({"--job", longline});
  CHECK_THAT(m, Catch::EndsWith(std::string(120, 'x') + "… (200000 bytes)' is not key = value (a comment starts with #)"));
  CHECK(m.size() < 400);
  for (const auto& f : {ff, noeq, nokey, longline}) std::filesystem::remove(f);
}

// A NUL in `run-name = ab\0cd` cut the name at the NUL and the run folder's
// mkdir looped forever on the cut path; `train-data = a.h5\0junk` read a.h5;
// an escape sequence in a value reached the terminal; a binary file was
// refused as one with old Mac line endings (a helper's break report).
TEST_CASE("control characters: refused in a job file with their line, and in command-line values", "[config]") {
  const std::string nul = write_job("nul.ini", "model = lenet5\nrun-name = ab" + std::string(1, '\0') + "cd\n");
  CHECK(usage_message({"--job", nul}) == "job file '" + nul + "': line 2 holds the control character \\x00: "
                                          "'run-name = ab\\x00cd' (a job file is text: key = value lines; this file holds NUL bytes: is it a job file?)");
  const std::string esc = write_job("esc.ini", "seed = 2\n\x1b[2Jlr = 0.1\n");
  CHECK_THAT(usage_message({"--job", esc}), Catch::StartsWith("job file '" + esc + "': line 2 holds the control character \\x1b"));
  const std::string noname = write_job("ffkey.ini", "\f= 2\n");
  CHECK_THAT(usage_message({"--job", noname}), Catch::StartsWith("job file '" + noname + "': line 1 holds the control character \\x0c"));
  const std::string utf16 = write_job("utf16.ini", std::string("\xFF\xFEm\0o\0", 6));
  CHECK(usage_message({"--job", utf16}) == "job file '" + utf16 + "' is UTF-16 (it starts with a UTF-16 byte-order mark): save it as UTF-8");
  // Tabs are whitespace, not refused.
  TrainConfig c;
  const std::string tabs = write_job("tabs.ini", "model\t=\tlenet5\t\ntrain-data = a.h5\n");
  REQUIRE(parse_train_args({"--job", tabs}, c));
  CHECK(c.model == "lenet5");
  // The command line: a value holding one is refused, shown as \xNN.
  CHECK(usage_message({"--train-data", "a.h5", "--run-name", "a\x1b[31mRED"}) ==
        "command line: option 'run-name' got 'a\\x1b[31mRED', which holds the control character \\x1b (a value is printable text)");
  // A key with invisible bytes is shown as \xNN (Boost printed them raw).
  const std::string nbsp = write_job("nbsp.ini", "\xc2\xa0seed = 2\n");
  CHECK_THAT(usage_message({"--job", nbsp}), Catch::Contains("unrecognised option '\\xc2\\xa0seed'"));
  // A CRLF line is shown without its CR; UTF-32 is named; a CR inside an LF
  // file's line is no old Mac line ending; a long unknown key is cut.
  const std::string crlf = write_job("crlfesc.ini", "model = lenet5\r\nrun-name = a\x1b\r\n");
  CHECK(usage_message({"--job", crlf}) == "job file '" + crlf + "': line 2 holds the control character \\x1b: "
                                           "'run-name = a\\x1b' (a job file is text: key = value lines)");
  const std::string utf32 = write_job("utf32.ini", std::string("\xFF\xFE\0\0m\0\0\0", 8));
  CHECK_THAT(usage_message({"--job", utf32}), Catch::EndsWith("is UTF-32 (it starts with a UTF-32 byte-order mark): save it as UTF-8"));
  const std::string cr = write_job("cr.ini", "model = lenet5\nrun-name = a\rb\n");
  CHECK(usage_message({"--job", cr}) == "job file '" + cr + "': line 2 has a lone carriage return (\\r inside a line): remove it");
  const std::string longkey = write_job("longkey.ini", std::string(300, 'k') + " = 1\n");
  CHECK(usage_message({"--job", longkey}) == "job file '" + longkey + "': unrecognised option '" + std::string(120, 'k') + "…'");
  for (const auto& f : {nul, esc, noname, utf16, tabs, nbsp, crlf, utf32, cr, longkey}) std::filesystem::remove(f);
}

TEST_CASE("a job file with old Mac line endings is refused naming the line", "[config]") {
  // One line to Boost: lr's value ran on over the rest, the other keys were lost.
  const std::string job = write_job("mac.ini", "model = lenet5\rtrain-data = a.h5\rlr = 0.1\r");
  CHECK_THAT(usage_message({"--job", job}),
             Catch::StartsWith("job file '" + job + "': line 1 has a lone carriage return"));
  // Windows line endings are read as before.
  const std::string win = write_job("win.ini", "model = lenet5\r\ntrain-data = a.h5\r\nlr = 0.25\r\n");
  TrainConfig c;
  REQUIRE(dtrain::engine::parse_train_args({"--job", win}, c));
  CHECK(c.lr == 0.25f);
  CHECK(c.train_data == "a.h5");
  std::filesystem::remove(job);
  std::filesystem::remove(win);
}
