// layers/backend.cpp — the defaults of the backend contract for host backends
// (transfers as memmove, plain aligned host memory). The factory is
// layers/backend_list.cpp.
#include "layers/backend.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"

namespace dtrain::layers {

void Backend::upload(const void* host, void* dst, size_t bytes) {
  if (bytes > 0 && host != dst) std::memmove(dst, host, bytes);
}

void Backend::download(const void* src, void* host, size_t bytes) {
  if (bytes > 0 && src != host) std::memmove(host, src, bytes);
}

void* Backend::host_alloc(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  DT_CHECK(p != nullptr, "cannot allocate ", bytes, " bytes of host memory");
  return p;
}

void Backend::host_free(void* p) { std::free(p); }

}  // namespace dtrain::layers
