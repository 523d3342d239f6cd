// tests/test_failure_record.cpp — the failure record (core/error.hpp
// record_failure, engine/metrics.hpp): a job-ending failure on rank 0 leaves
// one {"kind":"failed"} line after the metrics records, once per process, and
// a recorder that throws never changes how the job ends. The end-to-end checks
// (a diverged run, a stopped server named by rank 0's watchdog) are in
// tests/integration/bad_input.sh and rank_failures.sh.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "engine/metrics.hpp"
#include "tests/test_io_util.hpp"

using dtrain::engine::MetricsWriter;
using dtrain::test::TempDir;

namespace {
std::vector<nlohmann::json> records(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}
}  // namespace

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
  const auto recs = records(path);
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
