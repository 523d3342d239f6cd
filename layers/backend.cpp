// layers/backend.cpp — the ordered list of backends and the factory.
#include "layers/backend.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"
#include "layers/cpu/onednn.hpp"
#include "layers/cpu/reference.hpp"
#include "layers/cpu/staged.hpp"

#ifdef DTRAIN_HAVE_CUDA
#include "layers/cuda/cuda_backend.hpp"
#endif

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

std::vector<std::string> available_backends() {
  std::vector<std::string> v{"cpu", "reference", "cpu-staged"};
#ifdef DTRAIN_HAVE_CUDA
  v.push_back("cuda");
#endif
  return v;
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "cpu") return make_cpu_backend();
  if (name == "reference") return make_reference_backend();
  if (name == "cpu-staged") return make_staged_backend(make_cpu_backend());
#ifdef DTRAIN_HAVE_CUDA
  if (name == "cuda") return make_cuda_backend();
#endif
  std::string known;
  for (auto& b : available_backends()) known += (known.empty() ? "" : ", ") + b;
  DT_USAGE("unknown or unavailable backend '", name, "' (this build has: ", known, ")");
}

}  // namespace dtrain::layers
