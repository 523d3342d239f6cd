// core/error.cpp — rank and host bookkeeping for error messages; the failure recorder.
#include "core/error.hpp"

#include <unistd.h>

#include <atomic>
#include <mutex>

namespace dtrain {

namespace {
std::atomic<int> g_error_rank{-1};
std::mutex g_recorder_mu;
std::function<void(const std::string&, int)> g_recorder;
std::atomic<bool> g_recorded{false};
}  // namespace

void set_failure_recorder(std::function<void(const std::string& what, int exit_code)> fn) {
  std::lock_guard<std::mutex> lk(g_recorder_mu);
  g_recorder = std::move(fn);
  g_recorded.store(false);
}

void record_failure(const std::string& what, int exit_code) noexcept {
  if (g_recorded.exchange(true)) return;
  try {
    std::function<void(const std::string&, int)> fn;
    {
      std::lock_guard<std::mutex> lk(g_recorder_mu);
      fn = g_recorder;
    }
    if (fn) fn(what, exit_code);
  } catch (...) {
  }
}

void set_error_rank(int rank) { g_error_rank.store(rank); }
int error_rank() { return g_error_rank.load(); }

const std::string& error_host() {
  static const std::string host = [] {
    char buf[256] = {0};
    if (::gethostname(buf, sizeof buf - 1) != 0) return std::string("?");
    return std::string(buf);
  }();
  return host;
}

std::string rank_prefix() {
  int r = error_rank();
  return r >= 0 ? "rank " + std::to_string(r) + " on " + error_host() + ": " : std::string();
}

namespace detail {
std::string where(const char* file, int line) {
  std::string f(file);
  // Keep the path relative to the source tree: "layers/net.cpp", not "/home/.../layers/net.cpp".
  for (const char* top : {"/core/", "/layers/", "/io/", "/comm/", "/engine/", "/tests/"}) {
    auto pos = f.rfind(top);
    if (pos != std::string::npos) {
      f = f.substr(pos + 1);
      break;
    }
  }
  return rank_prefix() + f + ":" + std::to_string(line) + ": ";
}
}  // namespace detail

}  // namespace dtrain
