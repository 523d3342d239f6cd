// core/error.cpp — rank bookkeeping for error messages.
#include "core/error.hpp"

#include <atomic>

namespace dtrain {

namespace {
std::atomic<int> g_error_rank{-1};
}

void set_error_rank(int rank) { g_error_rank.store(rank); }
int error_rank() { return g_error_rank.load(); }

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
  int r = error_rank();
  std::string prefix = r >= 0 ? "rank " + std::to_string(r) + ": " : "";
  return prefix + f + ":" + std::to_string(line) + ": ";
}
}  // namespace detail

}  // namespace dtrain
