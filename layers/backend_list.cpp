// layers/backend_list.cpp — the ordered list of backends and the factory
// (backend.hpp). It is the one file that sees every backend, so it lives in
// the CMake target above them all (dtrain_layers, linking dtrain_layers_base
// and, when built, dtrain_layers_cuda): the backends depend on the contract,
// never on this list, and no target cycle is needed.
#include <string>
#include <vector>

#include "core/error.hpp"
#include "layers/backend.hpp"
#include "layers/cpu/onednn.hpp"
#include "layers/cpu/reference.hpp"
#include "layers/cpu/staged.hpp"

#ifdef DTRAIN_HAVE_CUDA
#include "layers/cuda/cuda_backend.hpp"
#endif

namespace dtrain::layers {

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
