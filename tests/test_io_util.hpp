// tests/test_io_util.hpp — helpers shared by the io/ tests: a self-removing temp
// directory and a catcher that returns the message of an expected UsageError.
#pragma once

#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace dtrain::test {

// A fresh directory under the system temp dir, removed with its contents.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("dtrain-io-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Runs f, requires it to throw dtrain::UsageError, returns the message.
template <typename F>
std::string usage_error_message(F&& f) {
  try {
    f();
  } catch (const dtrain::UsageError& e) {
    return e.what();
  }
  FAIL("expected a dtrain::UsageError, none was thrown");
  return {};
}

// Runs f and returns the message of the dtrain::Error (UsageError included)
// it throws, or "no error".
template <typename F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const dtrain::Error& e) {
    return e.what();
  }
  return "no error";
}

// Names of files in dir whose name contains ".tmp." (leftovers of a writer).
inline int count_temp_files(const std::filesystem::path& dir) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) ++n;
  return n;
}

// The records of a JSON Lines file (a metrics file); throws on a line that is
// not JSON (a cut record).
inline std::vector<nlohmann::json> json_lines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace dtrain::test
