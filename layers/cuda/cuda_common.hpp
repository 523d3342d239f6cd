// layers/cuda/cuda_common.hpp — internals shared by the CUDA backend's files:
// the per-backend context (device, library handles, shared workspace,
// convolution reports) and the factories of the stateful kernels. The cuDNN
// and cuBLAS check macros are core/error.hpp's.
//
//   cuda_backend.cpp    the Backend: storage, transfers, elementwise ops, factory
//   cuda_conv.cpp       convolution (cuDNN, algorithm search) and linear (cuBLAS)
//   cuda_norm_pool.cpp  pooling and batch norm (cuDNN), LRN (custom kernel)
//   cuda_kernels.cu     the custom kernels (cuda_kernels.hpp declares them)
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <memory>
#include <mutex>
#include <vector>

#include "core/error.hpp"
#include "layers/cuda/cuda_backend.hpp"

namespace dtrain::layers::cuda {

// One per backend; kernels hold a shared_ptr so it outlives whichever of
// backend and kernels goes last.
class Context {
 public:
  explicit Context(const CudaOptions& o);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const CudaOptions& options() const { return opt_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasHandle_t cublas() const { return cublas_; }
  void activate() const;  // cudaSetDevice(device)

  // The shared workspace, grown to at least `bytes` (never above the budget
  // unless asked for more by a caller that checked).
  void* workspace(size_t bytes);
  size_t workspace_size() const { return ws_size_; }

  // Convolution reports (cuda_backend.hpp); kernels update their own row.
  size_t add_report(const ConvLayerReport& r);
  void set_report(size_t row, const ConvLayerReport& r);
  std::vector<ConvLayerReport> reports() const;

 private:
  CudaOptions opt_;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* ws_ = nullptr;
  size_t ws_size_ = 0;
  mutable std::mutex mu_;
  std::vector<ConvLayerReport> reports_;
};

using ContextPtr = std::shared_ptr<Context>;

// Device memory of `bytes` (at least 256), zero-filled, freed by the deleter.
std::shared_ptr<float> device_alloc(size_t bytes);

// RAII cuDNN descriptors.
struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc(int n, int c, int h, int w);
  ~TensorDesc();
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
};

std::unique_ptr<ConvKernel> make_conv(ContextPtr ctx, const ConvDesc& d);
std::unique_ptr<LinearKernel> make_linear(ContextPtr ctx, const LinearDesc& d);
std::unique_ptr<PoolKernel> make_pool(ContextPtr ctx, const PoolDesc& d);
std::unique_ptr<LrnKernel> make_lrn(ContextPtr ctx, const LrnDesc& d);
std::unique_ptr<BatchNormKernel> make_batch_norm(ContextPtr ctx, const BatchNormDesc& d);

}  // namespace dtrain::layers::cuda
