// tests/test_full_disk.cpp — what a full disk does to dtrain's writers. A
// per-process file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes writes past
// a chosen size fail with EFBIG, as ENOSPC would on a full disk, without root
// or a small file system: the metrics file keeps whole records and the job gets
// an Error naming it (engine/metrics.hpp); an HDF5 writer's failure is one line
// with the system's message first and leaves no temporary file (io/h5_util.hpp).
#include <sys/resource.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/metrics.hpp"
#include "io/hdf5_dataset.hpp"
#include "tests/test_io_util.hpp"

using Catch::Matchers::Contains;
using dtrain::engine::MetricsWriter;
using dtrain::test::TempDir;
namespace fs = std::filesystem;

namespace {

// Writes past `bytes` of any file fail with EFBIG while this lives.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_) == 0);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    const rlimit r{bytes, old_.rlim_max};
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &r) == 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const dtrain::Error& e) {
    return e.what();
  }
  return "no error";
}

std::vector<nlohmann::json> records(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));  // throws on a cut line
  return out;
}

}  // namespace

TEST_CASE("a metrics write that fails leaves whole records and is an Error naming the file", "[metrics]") {
  TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  MetricsWriter w(path);
  w.write({{"kind", "step"}, {"step", 1}});
  w.write({{"kind", "step"}, {"step", 2}});
  const auto whole = fs::file_size(path);
  std::string msg;
  {
    FileSizeLimit full(whole + 10);  // room for 10 bytes of the next record only
    msg = error_of([&] { w.write({{"kind", "epoch"}, {"epoch", 1}, {"pad", std::string(100, 'x')}}); });
  }
  INFO(msg);
  CHECK_THAT(msg, Contains(path) && Contains("'epoch' record failed") && Contains(std::strerror(EFBIG)));
  CHECK(fs::file_size(path) == whole);  // cut back to the last whole record
  w.write({{"kind", "step"}, {"step", 3}});  // room again: appended after them
  {
    FileSizeLimit full(fs::file_size(path) + 5);
    msg = error_of([&] { MetricsWriter::append_record(path, {{"kind", "run"}, {"steps", 3}}); });
  }
  CHECK_THAT(msg, Contains(path) && Contains("'run' record failed"));
  const auto recs = records(path);
  REQUIRE(recs.size() == 3);
  for (int k = 0; k < 3; ++k) CHECK(recs[size_t(k)]["step"] == k + 1);
  MetricsWriter::append_record(path, {{"kind", "run"}, {"steps", 3}});
  CHECK(records(path).back()["kind"] == "run");
}

TEST_CASE("an HDF5 write on a full disk: one line, the system's message first, no temporary left", "[io]") {
  TempDir dir;
  const int64_t n = 512, h = 28, w = 28, c = 1;
  std::vector<uint8_t> images(size_t(n * h * w * c), 7);
  std::vector<int32_t> labels(size_t(n), 3);
  // The same name each time, then written for good: HDF5 keeps a file whose
  // close failed open inside the library, and the commit's count of objects
  // left open once counted it (io/h5_util.cpp), failing every later write.
  for (rlim_t limit : {rlim_t{0}, rlim_t{4096}, rlim_t{200000}}) {
    const std::string path = dir.file("data.h5");
    std::string msg;
    {
      FileSizeLimit full(limit);
      msg = error_of([&] { dtrain::io::write_dataset(path, images, n, h, w, c, labels, 10); });
    }
    INFO("limit " << limit << ": " << msg);
    CHECK_THAT(msg, Contains(std::string(std::strerror(EFBIG)) + " (errno " + std::to_string(EFBIG) + ")"));
    CHECK(msg.find('\n') == std::string::npos);
    CHECK_FALSE(fs::exists(path));
    CHECK(dtrain::test::count_temp_files(dir.path()) == 0);
  }
  const std::string path = dir.file("data.h5");
  dtrain::io::write_dataset(path, images, n, h, w, c, labels, 10);  // no limit: written
  CHECK(dtrain::io::Hdf5Dataset(path).n() == n);
}
