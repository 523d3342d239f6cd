// layers/cuda/cuda_backend.hpp — the CUDA backend (cuDNN + cuBLAS + a few
// custom kernels), its options, and what it tells the tuner.
//
// Built when the CUDA toolkit is found (DTRAIN_CUDA=AUTO|ON); it compiles on
// machines without a GPU, and make_cuda_backend() then fails with a clear
// UsageError. This header includes no CUDA header: engine/ and tests include
// it from plain C++.
//
// Streams: every kernel, copy and library call of the backend is issued on the
// legacy default stream of the backend's device, so work is ordered with
// plain cudaMemcpy and with any blocking stream (the NCCL reducer's); host
// reads go through download(), which waits.
//
// Convolution algorithms (the paper's "choosing computation algorithms"):
// each conv kernel runs cuDNN's find API (cudnnFind*AlgorithmEx) once per pass
// (forward at its first forward, backward-data and backward-filter at its first
// backward, on the real buffers), then keeps the fastest algorithm whose
// workspace fits CudaOptions::workspace_bytes. The choices are logged (one line
// per pass) and kept in conv_report(). One workspace buffer, as large as the
// largest chosen algorithm needs, is shared by all layers.
//
// Precision (--precision, NetOptions::precision → KernelExec::precision):
// fp32 everywhere by default (TF32 tensor cores only with CudaOptions::tf32).
// With bf16, the convolutions and the linear layers compute on bf16 copies
// with f32 accumulation; everything else stays as in fp32:
//   - activations between layers stay float32 plain NCHW: every kernel
//     reports f32 nchw formats, blocked_formats() and fuses_relu() are false
//     (unlike the cpu backend, whose bf16 activations flow between layers);
//   - convolution: per call x (and dy) are cast to bf16 device scratch and the
//     f32 weights to a bf16 copy (kept per kernel: backward reuses forward's
//     copy for the same pointer); cuDNN runs forward, backward-data and
//     backward-filter with BFLOAT16 tensor and filter descriptors, an f32
//     compute type and tensor-op math, its algorithm search on those bf16
//     descriptors; y, dx, dw come back in bf16 and are widened into the f32
//     buffers (so each is rounded once, relative 2^-9); bias and db in f32;
//   - linear: x, W (and dy) cast to bf16, cublasGemmEx with bf16 inputs, f32
//     output and CUBLAS_COMPUTE_32F: y, dx, dW written in f32 directly;
//   - batch norm, pooling, LRN, elementwise ops, softmax cross-entropy and SGD
//     compute in f32 as in fp32 mode; parameters, gradients, optimizer state,
//     batch-norm statistics and the loss are f32 (mixed precision).
// The casts cost one pass over x, dy and w per call; the bf16 activation
// copies live in one scratch buffer shared by all kernels, as large as the
// largest layer needs (cuda_bf16_scratch_bytes). precision_unsupported(bf16)
// is "" on devices of compute capability ≥ 8.0 (bf16 tensor cores), else a
// sentence naming the device and its capability, which Net::finalize turns
// into a UsageError naming option 'precision'.
// Status: compiled and linked, never run — no GPU was available where it was
// written; the [cuda] tests of it (tests/test_cuda_bf16.cpp, the table's
// "backend ops: cuda kernels in bf16") have not run either.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "layers/backend.hpp"

namespace dtrain::layers {

struct CudaOptions {
  int device = 0;                         // CUDA device index (see cuda_device_for_local_rank)
  size_t workspace_bytes = size_t(256) << 20;  // conv workspace budget (--workspace-mb · 2^20)
  bool tf32 = false;            // allow TF32 tensor cores in f32 conv and GEMM (FP32 otherwise)
  bool log_algorithms = true;   // one log line per conv pass with the chosen algorithm
};

// Throws UsageError when no CUDA device is visible or `device` is out of range.
std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options = {});

int cuda_device_count();  // 0 when there is no driver or no GPU (never throws)

// Local rank → device index: local_rank mod visible devices. Throws UsageError
// when no device is visible.
int cuda_device_for_local_rank(int local_rank);

// A string naming the physical GPU behind `device` (its UUID and PCI bus id),
// identical for two processes that see the same GPU under different indices
// (CUDA_VISIBLE_DEVICES): what comm::check_device_binding compares.
std::string cuda_device_key(int device);

// One algorithm choice of one convolution pass.
struct ConvAlgoChoice {
  bool chosen = false;      // false until the pass ran once (or when dx is never asked)
  int algo = -1;            // cuDNN's enum value
  std::string name;         // e.g. "IMPLICIT_PRECOMP_GEMM"
  float ms = 0.0f;          // cuDNN's measured time
  size_t workspace_bytes = 0;
};

// What the tuner needs of one convolution layer (DESIGN.md §4, minibatch choice).
struct ConvLayerReport {
  ConvDesc desc;                         // including the minibatch N it was found for
  ConvAlgoChoice forward, backward_data, backward_filter;
  size_t activation_bytes_per_sample = 0;  // input + output of the layer, float32
  size_t workspace_bytes() const;          // the largest of the three choices
};

// The convolution reports of a CUDA backend, in creation order (one per conv
// kernel alive or dead; kernels re-made for another minibatch add a row).
// Throws Error when `backend` is not the CUDA backend.
std::vector<ConvLayerReport> cuda_conv_report(const Backend& backend);
// Bytes of the shared workspace buffer now allocated (≤ the budget).
size_t cuda_workspace_bytes(const Backend& backend);
// Bytes of the shared bf16 scratch now allocated (0 unless bf16 kernels ran).
size_t cuda_bf16_scratch_bytes(const Backend& backend);

}  // namespace dtrain::layers
