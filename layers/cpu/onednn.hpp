// layers/cpu/onednn.hpp — the CPU backend: oneDNN for convolution, pooling, LRN,
// batch normalisation, ReLU and linear layers (matmul), in f32 or bf16.
#pragma once

#include <memory>

#include "layers/backend.hpp"

namespace dtrain::layers {
std::unique_ptr<Backend> make_cpu_backend();

// GFLOP/s (10^9 multiply-adds × 2 per second) of one size³ matrix product
// through oneDNN's matmul on this CPU with the current thread count
// (set_cpu_threads): inputs in `t`, f32 accumulation and output; the best of
// `reps` runs after a warm-up. The yardstick of `dtrain bench compute`.
double gemm_gflops(DType t, int size = 2048, int reps = 3);
}
