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
  bool tf32 = false;            // allow TF32 tensor cores in conv and GEMM (FP32 otherwise)
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

}  // namespace dtrain::layers
