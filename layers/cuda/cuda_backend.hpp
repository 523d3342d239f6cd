// layers/cuda/cuda_backend.hpp — the CUDA backend (cuDNN + cuBLAS).
//
// Built when the CUDA toolkit is found (DTRAIN_CUDA=AUTO|ON). The kernels
// arrive with the GPU backend issue; until then make_cuda_backend() reports
// the number of visible devices and refuses with a clear error, so that a job
// asking for `cuda` fails before any work starts instead of computing wrong.
#pragma once

#include <memory>

#include "layers/backend.hpp"

namespace dtrain::layers {
std::unique_ptr<Backend> make_cuda_backend();
int cuda_device_count();  // 0 when no driver / no GPU
}
