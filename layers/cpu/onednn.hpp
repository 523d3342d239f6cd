// layers/cpu/onednn.hpp — the CPU backend: oneDNN for convolution, pooling, LRN,
// batch normalisation and ReLU; OpenBLAS sgemm for linear layers.
#pragma once

#include <memory>

#include "layers/backend.hpp"

namespace dtrain::layers {
std::unique_ptr<Backend> make_cpu_backend();
}
