// tests/test_failure_record.cpp — the failure record (core/error.hpp
// record_failure, engine/metrics.hpp): a job-ending failure on rank 0 leaves
// one {"kind":"failed"} line after the metrics records, once per process, and
// a recorder that throws never changes how the job ends. The end-to-end checks
// (a diverged run, a stopped server named by rank 0's watchdog) are in
// tests/integration/bad_input.sh and rank_failures.sh.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "engine/metrics.hpp"
#include "engine/report.hpp"
#include "engine/run_folder.hpp"
#include "tests/test_io_util.hpp"

using dtrain::engine::MeasuredRun;
using dtrain::engine::MetricsWriter;
using dtrain::test::json_lines;
using dtrain::test::TempDir;


TEST_CASE("record_failure appends the failure once after the metrics records", "[metrics]") {
  TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  {
    MetricsWriter w(path);
    w.write({{"kind", "step"}, {"step", 1}});
    int calls = 0;
    dtrain::set_failure_recorder([&](const std::string& what, int code) {
      ++calls;
      CHECK(MetricsWriter::try_append_record(path, {{"kind", "failed"}, {"error", what}, {"exit_code", code}}, 1.0));
    });
    dtrain::record_failure("rank 0 on h: the first failure", dtrain::kExitUsage);
    dtrain::record_failure("a second message of the same ending");  // the job is already ending: nothing
    CHECK(calls == 1);
    w.write({{"kind", "step"}, {"step", 2}});  // the writer's file stays whole around it
  }
  const auto recs = json_lines(path);
  REQUIRE(recs.size() == 3);
  CHECK(recs[1]["kind"] == "failed");
  CHECK(recs[1]["error"] == "rank 0 on h: the first failure");
  CHECK(recs[1]["exit_code"] == 2);
  CHECK(recs[2]["step"] == 2);
  dtrain::set_failure_recorder({});
}

TEST_CASE("a failure recorder that throws is swallowed and none registered does nothing", "[metrics]") {
  dtrain::set_failure_recorder([](const std::string&, int) { throw std::runtime_error("disk gone"); });
  CHECK_NOTHROW(dtrain::record_failure("x"));
  dtrain::set_failure_recorder({});
  CHECK_NOTHROW(dtrain::record_failure("y"));
  // A new registration arms it again (a process that trains twice, as the tests do).
  int calls = 0;
  dtrain::set_failure_recorder([&](const std::string&, int code) { calls += code; });
  dtrain::record_failure("z");  // kExitFailure unless told
  CHECK(calls == 1);
  dtrain::set_failure_recorder({});
}

// --metrics-append onto a file whose last line has no newline (a writer killed
// mid-record) glued the first new record onto it: both unreadable, and the
// whole file refused by dtrain report (a helper's finding).
TEST_CASE("appending to a metrics file cuts off a last line without a newline", "[metrics]") {
  TempDir dir;
  for (size_t fragment_bytes : {size_t(20), size_t(10000)}) {  // within one read block and across three
    const std::string path = dir.file("cut" + std::to_string(fragment_bytes) + ".jsonl");
    {
      std::ofstream f(path);
      f << "{\"kind\":\"step\",\"step\":1}\n{\"kind\":\"step\",\"step\":2}\n"
        << "{\"kind\":\"step\",\"pad\":\"" << std::string(fragment_bytes, 'x');  // cut: no newline
    }
    {
      MetricsWriter w(path, /*append=*/true);
      w.write({{"kind", "step"}, {"step", 3}});
    }
    const auto recs = json_lines(path);  // throws on a line that is not JSON
    REQUIRE(recs.size() == 3);
    CHECK(recs[2]["step"] == 3);
  }
  // A file of one cut line only, and a whole file, which is left as it is.
  const std::string only = dir.file("only.jsonl");
  { std::ofstream(only) << "{\"kind\""; }
  { MetricsWriter(only, true).write({{"kind", "step"}, {"step", 1}}); }
  CHECK(json_lines(only).size() == 1);
  const std::string whole = dir.file("whole.jsonl");
  { std::ofstream(whole) << "{\"kind\":\"step\",\"step\":1}\n"; }
  { MetricsWriter(whole, true).write({{"kind", "step"}, {"step", 2}}); }
  CHECK(json_lines(whole).size() == 2);
}

// --metrics-append named a file that was not a metrics file (a README, notes):
// its last line was cut and records appended (a helper's finding). check_outputs
// refuses such a file before any work, MetricsWriter a last line that is not a
// record's start; a checkpoint folder that is the run folders' parent, and an
// output name too long for its temporaries, are refused too.
TEST_CASE("outputs: --metrics-append continues metrics files only, and clashing or too long names are refused",
          "[metrics]") {
  using dtrain::test::usage_error_message;
  TempDir dir;
  const std::string notes = dir.file("notes.txt");
  const std::string text = "line one\nimportant last line without newline";
  { std::ofstream(notes) << text; }
  auto slurp = [](const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  dtrain::engine::TrainConfig cfg;
  cfg.train_data = dir.file("train.h5");
  cfg.metrics = notes;
  cfg.metrics_append = true;
  cfg.save_params = "";
  cfg.timeline = "";
  CHECK_THAT(usage_error_message([&] { dtrain::engine::check_outputs(cfg); }),
             Catch::Matchers::Contains("is not a metrics file") && Catch::Matchers::Contains("line one"));
  CHECK_THAT(usage_error_message([&] { MetricsWriter w(notes, true); }),
             Catch::Matchers::Contains("not the start of a record"));
  CHECK(slurp(notes) == text);
  // A metrics file, an empty file, and one cut record pass; a JSON document of
  // another kind without a newline (json.dump's) does not, nor is it cut.
  for (const std::string body : {"{\"kind\":\"step\",\"step\":1}\n", "", "{\"kind\":\"st"}) {
    { std::ofstream(notes) << body; }
    CHECK_NOTHROW(dtrain::engine::check_outputs(cfg));
  }
  { std::ofstream(notes) << "{\"a\": 1}"; }
  CHECK_THAT(usage_error_message([&] { dtrain::engine::check_outputs(cfg); }),
             Catch::Matchers::Contains("is not a metrics file"));
  CHECK_THAT(usage_error_message([&] { MetricsWriter w(notes, true); }),
             Catch::Matchers::Contains("not the start of a record"));
  CHECK(slurp(notes) == "{\"a\": 1}");
  // Every line counts, not the first only: notes after a record are refused, naming the line.
  { std::ofstream(notes) << "{\"kind\":\"step\",\"step\":1}\nmy notes\nimportant: do not lose"; }
  CHECK_THAT(usage_error_message([&] { dtrain::engine::check_outputs(cfg); }),
             Catch::Matchers::Contains("its line 2, 'my notes'"));
  // A tail of zero bytes (a crash before the data reached the disk) is cut like a cut record.
  { std::ofstream(notes, std::ios::binary) << "{\"kind\":\"step\",\"step\":1}\n" << std::string(100, '\0'); }
  CHECK_NOTHROW(dtrain::engine::check_outputs(cfg));
  { MetricsWriter(notes, true).write({{"kind", "step"}, {"step", 2}}); }
  CHECK(json_lines(notes).size() == 2);
  // A symbolic link is named as one.
  std::filesystem::create_symlink(notes, dir.file("link.jsonl"));
  cfg.metrics = dir.file("link.jsonl");
  CHECK_THAT(usage_error_message([&] { dtrain::engine::check_outputs(cfg); }),
             Catch::Matchers::Contains("is a symbolic link"));
  cfg.metrics = notes;
  // A whole record without its newline is kept and completed, not cut.
  { std::ofstream(notes) << "{\"kind\":\"step\",\"step\":1}"; }
  { MetricsWriter(notes, true).write({{"kind", "step"}, {"step", 2}}); }
  CHECK(json_lines(notes).size() == 2);
  // A checkpoint folder that is the run folders' parent (runs-dir/run-name).
  dtrain::engine::TrainConfig runs = cfg;
  runs.metrics = "auto";
  runs.metrics_append = false;
  runs.runs_dir = dir.file("runs");
  runs.run_name = "e12";
  runs.checkpoint_dir = dir.file("runs/e12");
  CHECK_THAT(usage_error_message([&] { dtrain::engine::check_outputs(runs); }),
             Catch::Matchers::Contains("option 'checkpoint-dir'") && Catch::Matchers::Contains("of their own"));
  runs.checkpoint_dir = dir.file("runs/e12/checkpoints");
  CHECK_NOTHROW(dtrain::engine::check_outputs(runs));
  runs.checkpoint_dir = dir.file("runs/e12/latest/ck");  // through the runs' latest link
  CHECK_THAT(usage_error_message([&] { dtrain::engine::check_outputs(runs); }),
             Catch::Matchers::Contains("goes through the run folders' 'latest' link"));
  runs.checkpoint_dir = dir.file("runs");  // the runs-dir itself, with a run named like its pointer
  runs.run_name = "latest";
  CHECK_THAT(usage_error_message([&] { dtrain::engine::check_outputs(runs); }),
             Catch::Matchers::Contains("option 'run-name': 'latest' is a name the checkpoints write"));
  runs.run_name = "e12";
  CHECK_NOTHROW(dtrain::engine::check_outputs(runs));
  // A name that fits NAME_MAX alone, but not with its temporary's suffix: refused before the work.
  dtrain::engine::TrainConfig longname = cfg;
  longname.metrics = "";
  longname.save_params = dir.file(std::string(252, 'z') + ".h5");
  CHECK_THAT(usage_error_message([&] { dtrain::engine::check_outputs(longname); }),
             Catch::Matchers::Contains("option 'save-params'") && Catch::Matchers::Contains("shorten it by 12 bytes"));
  longname.save_params = dir.file(std::string(240, 'z') + ".h5");  // 243 + ".tmp.<pid>" fits 255
  CHECK_NOTHROW(dtrain::engine::check_outputs(longname));
  longname.save_params = "";  // metrics are written in place: a 255-byte name is fine
  longname.metrics = dir.file(std::string(249, 'm') + ".jsonl");
  CHECK_NOTHROW(dtrain::engine::check_outputs(longname));
}

// Two runs in one metrics file (--metrics-append with another configuration,
// or files joined with cat) were pooled: every step record read under the
// last run record's minibatch (a helper's finding).
TEST_CASE("dtrain report reads the step records of the last run record only", "[metrics]") {
  TempDir dir;
  const std::string path = dir.file("two.jsonl");
  auto run = [](int minibatch) {
    return nlohmann::json{{"kind", "run"},   {"model", "lenet5"}, {"mode", "allreduce"}, {"minibatch", minibatch},
                          {"workers", 1},    {"servers", 0},      {"ranks_per_node", 0}, {"threads", 1},
                          {"cores", 2.0}};
  };
  auto step = [](double ips, double tc) {
    return nlohmann::json{{"kind", "step"}, {"images_per_s", ips}, {"t_compute_s", tc}};
  };
  {
    std::ofstream f(path);
    for (int i = 0; i < 4; ++i) f << step(64000, 0.0009).dump() << "\n";  // 1 ms steps of 64
    f << run(64).dump() << "\n";
    for (int i = 0; i < 4; ++i) f << step(8000, 0.0016).dump() << "\n";  // 2 ms steps of 16
    f << run(16).dump() << "\n";
    f << step(1, 1).dump() << "\n";  // a start after the last record that did not finish
  }
  const MeasuredRun r = dtrain::engine::read_run(path);
  CHECK(r.minibatch == 16);
  CHECK(r.intervals == 3);  // 4 of the last run, the first (warm-up) dropped
  CHECK(r.step == Approx(0.002));
  CHECK(r.t_c == Approx(0.0016));
  CHECK(r.t_o == Approx(0.0004));
  // A requeued run: each start stopped on a signal writes a record ending
  // "checkpointed", and the starts' steps are one run's (slurm/train.sbatch).
  const std::string requeued = dir.file("requeued.jsonl");
  {
    std::ofstream f(requeued);
    auto checkpointed = run(16);
    checkpointed["end"] = "checkpointed";
    for (int i = 0; i < 3; ++i) f << step(8000, 0.0016).dump() << "\n";
    f << checkpointed.dump() << "\n";
    for (int i = 0; i < 3; ++i) f << step(8000, 0.0016).dump() << "\n";
    f << checkpointed.dump() << "\n";
    f << step(8000, 0.0016).dump() << "\n";  // a start killed before its record: the same run
    auto done = run(16);
    done["end"] = "done";
    f << step(8000, 0.0016).dump() << "\n" << done.dump() << "\n";
  }
  CHECK(dtrain::engine::read_run(requeued).intervals == 7);  // 8 steps, the first dropped
  // A run record's fields the model divides by or multiplies with: refused, naming the field and line.
  for (const auto& [field, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"threads", 0}, {"cores", 0.0}, {"minibatch", 0}, {"workers", -1}, {"threads", 1.5}}) {
    INFO(field << " = " << value.dump());
    const std::string bad = dir.file("bad.jsonl");
    {
      std::ofstream f(bad);
      auto rec = run(16);
      rec[field] = value;
      for (int i = 0; i < 3; ++i) f << step(8000, 0.0016).dump() << "\n";
      f << rec.dump() << "\n";
    }
    CHECK_THAT(dtrain::test::usage_error_message([&] { dtrain::engine::read_run(bad); }),
               Catch::Matchers::Contains(field) && Catch::Matchers::Contains("bad.jsonl:4"));
  }
}
