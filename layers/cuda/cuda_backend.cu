// layers/cuda/cuda_backend.cu — CUDA backend entry points (kernels: GPU issue).
#include <cuda_runtime.h>

#include "core/error.hpp"
#include "layers/cuda/cuda_backend.hpp"

namespace dtrain::layers {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

std::unique_ptr<Backend> make_cuda_backend() {
  DT_USAGE("the cuda backend's kernels are not implemented in this build yet (",
           cuda_device_count(), " CUDA device(s) visible); use --backend cpu");
}

}  // namespace dtrain::layers
