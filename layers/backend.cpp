// layers/backend.cpp — the ordered list of backends and the factory.
#include "layers/backend.hpp"

#include "core/error.hpp"
#include "layers/cpu/onednn.hpp"
#include "layers/cpu/reference.hpp"

#ifdef DTRAIN_HAVE_CUDA
#include "layers/cuda/cuda_backend.hpp"
#endif

namespace dtrain::layers {

std::vector<std::string> available_backends() {
  std::vector<std::string> v{"cpu", "reference"};
#ifdef DTRAIN_HAVE_CUDA
  v.push_back("cuda");
#endif
  return v;
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "cpu") return make_cpu_backend();
  if (name == "reference") return make_reference_backend();
#ifdef DTRAIN_HAVE_CUDA
  if (name == "cuda") return make_cuda_backend();
#endif
  std::string known;
  for (auto& b : available_backends()) known += (known.empty() ? "" : ", ") + b;
  DT_USAGE("unknown or unavailable backend '", name, "' (this build has: ", known, ")");
}

}  // namespace dtrain::layers
