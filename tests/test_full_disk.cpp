// tests/test_full_disk.cpp — what a full disk does to dtrain's writers. A
// per-process file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes writes past
// a chosen size fail with EFBIG, as ENOSPC would on a full disk, without root
// or a small file system: the metrics file keeps whole records and the job gets
// an Error naming it (engine/metrics.hpp); an HDF5 writer's failure is one line
// with the system's message first and leaves no temporary file (io/h5_util.hpp);
// dtrain tune's job file and profile are written whole or not at all
// (engine/tune.hpp).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "engine/metrics.hpp"
#include "engine/tune.hpp"
#include "io/hdf5_dataset.hpp"
#include "tests/test_io_util.hpp"

using Catch::Matchers::Contains;
using dtrain::engine::MetricsWriter;
using dtrain::test::error_message;
using dtrain::test::json_lines;
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
    msg = error_message([&] { w.write({{"kind", "epoch"}, {"epoch", 1}, {"pad", std::string(100, 'x')}}); });
  }
  INFO(msg);
  CHECK_THAT(msg, Contains(path) && Contains("'epoch' record failed") && Contains(std::strerror(EFBIG)));
  CHECK(fs::file_size(path) == whole);  // cut back to the last whole record
  w.write({{"kind", "step"}, {"step", 3}});  // room again: appended after them
  {
    FileSizeLimit full(fs::file_size(path) + 5);
    msg = error_message([&] { MetricsWriter::append_record(path, {{"kind", "run"}, {"steps", 3}}); });
  }
  CHECK_THAT(msg, Contains(path) && Contains("'run' record failed"));
  const auto recs = json_lines(path);
  REQUIRE(recs.size() == 3);
  for (int k = 0; k < 3; ++k) CHECK(recs[size_t(k)]["step"] == k + 1);
  MetricsWriter::append_record(path, {{"kind", "run"}, {"steps", 3}});
  CHECK(json_lines(path).back()["kind"] == "run");
}

TEST_CASE("an HDF5 write on a full disk: one line, the system's message first, no temporary left", "[io]") {
  TempDir dir;
  const int64_t n = 512, h = 28, w = 28, c = 1;
  std::vector<uint8_t> images(size_t(n * h * w * c), 7);
  std::vector<int32_t> labels(size_t(n), 3);
  const std::string path = dir.file("data.h5");
  const rlim_t limits[] = {0, 4096, 200000};
  // In a child process: HDF5 keeps a file whose close failed open inside the
  // library for the process's life, which later cases of this binary would
  // count as leaked objects. The child writes the same name under each limit,
  // then for good (the commit's count of open objects once counted the failed
  // file, io/h5_util.cpp, failing every later write), one line per write.
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    for (rlim_t limit : limits) {
      FileSizeLimit full(limit);
      out += error_message([&] { dtrain::io::write_dataset(path, images, n, h, w, c, labels, 10); }) + "\n";
      out += std::string(fs::exists(path) ? "file" : "no file") + ", " +
             std::to_string(dtrain::test::count_temp_files(dir.path())) + " temporary\n";
    }
    out += error_message([&] { dtrain::io::write_dataset(path, images, n, h, w, c, labels, 10); }) + "\n";
    const bool ok = ::write(fds[1], out.data(), out.size()) == ssize_t(out.size());
    std::exit(ok ? 0 : 1);  // exit handlers run: HDF5's crashed here closing a failed file (io/h5_util.cpp)
  }
  ::close(fds[1]);
  std::string got;
  char buf[4096];
  for (ssize_t k; (k = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, size_t(k));
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  std::vector<std::string> lines;
  for (size_t b = 0, e; (e = got.find('\n', b)) != std::string::npos; b = e + 1) lines.push_back(got.substr(b, e - b));
  REQUIRE(lines.size() == 2 * std::size(limits) + 1);
  for (size_t k = 0; k < std::size(limits); ++k) {
    INFO("limit " << limits[k] << ": " << lines[2 * k]);
    // One line (the split above would have cut a second), the system's message first.
    CHECK_THAT(lines[2 * k], Contains(std::string(std::strerror(EFBIG)) + " (errno " + std::to_string(EFBIG) + ")"));
    CHECK(lines[2 * k + 1] == "no file, 0 temporary");
  }
  CHECK(lines.back() == "no error");  // the same name, written for good after the failures
  CHECK(dtrain::io::Hdf5Dataset(path).n() == n);
}

TEST_CASE("dtrain tune's outputs on a full disk: an Error naming the file, neither name written", "[tune]") {
  // engine/tune_run.cpp wrote both files with plain streams and no check: on a
  // full disk tune said "wrote" and left a 0-byte job file and a cut-off profile.
  TempDir dir;
  const std::string out = dir.file("t.ini"), profile = out + ".profile.json";
  const std::string small(100, 's'), big(5000, 'b');
  // The profile too large, then the job file too large (the profile fits: it
  // must not be left behind alone either).
  for (const auto& [job_text, profile_text, failing] :
       {std::tuple{small, big, profile}, std::tuple{big, small, out}}) {
    std::string msg;
    {
      FileSizeLimit full(1000);
      msg = error_message([&] { dtrain::engine::write_tune_outputs(out, job_text, profile_text, false); });
    }
    INFO(msg);
    CHECK_THAT(msg, Contains("option 'out'") && Contains("'" + failing + "'") && Contains(std::strerror(EFBIG)));
    CHECK_FALSE(fs::exists(out));
    CHECK_FALSE(fs::exists(profile));
    CHECK(dtrain::test::count_temp_files(dir.path()) == 0);
  }
  // Room again: both written whole.
  dtrain::engine::write_tune_outputs(out, big, small, false);
  CHECK(fs::file_size(out) == big.size());
  CHECK(fs::file_size(profile) == small.size());
  CHECK(dtrain::test::count_temp_files(dir.path()) == 0);
}
