// layers/cpu/onednn.hpp — the CPU backend: oneDNN for convolution, pooling, LRN,
// batch normalisation, ReLU and linear layers (matmul), in f32 or bf16.
#pragma once

#include <memory>
#include <string>

#include "layers/backend.hpp"

namespace dtrain::layers {
std::unique_ptr<Backend> make_cpu_backend();

// GFLOP/s (10^9 multiply-adds × 2 per second) of one size³ matrix product
// through oneDNN's matmul on this CPU with the current thread count
// (set_cpu_threads): inputs in `t`, f32 accumulation and output; the best of
// `reps` runs after a warm-up. The yardstick of `dtrain bench compute`.
double gemm_gflops(DType t, int size = 2048, int reps = 3);

// A CPU may compute in bf16 (AVX512-BF16) and yet not faster than in f32:
// Sapphire/Emerald Rapids-class cores without AMX issue one bf16 dot product
// (vdpbf16ps) a cycle where they issue two f32 FMAs, so their bf16 matmul is
// slower (an Emerald Rapids Xeon without AMX, 2 threads, 2026-12-06: 153–173
// against 243–331 GFLOP/s; AlexNet-OWT and ResNet-50 trained at 0.61–0.67× their
// fp32 speed), while Cooper Lake, Zen 4 and AMX run bf16 about twice as fast.
// Given both GFLOP/s (gemm_gflops at the same thread count): a warning when
// bf16 measures below 0.9 × f32, naming both numbers; "" otherwise.
std::string bf16_slower_warning(double bf16_gflops, double f32_gflops);
// bf16_slower_warning of this CPU, measured (1024³ products, ~0.1 s), where
// oneDNN's bf16 ISA is AVX512-BF16 without AMX; "" elsewhere.
std::string measure_bf16_slower_warning();
}
