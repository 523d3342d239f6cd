// layers/cuda/cuda_common.hpp — internals shared by the CUDA backend's files:
// the per-backend context (device, library handles, shared workspace,
// convolution reports) and the factories of the stateful kernels. The cuDNN
// and cuBLAS check macros are core/error.hpp's.
//
//   cuda_backend.cpp    the Backend: storage, transfers, elementwise ops, factory
//   cuda_conv.cpp       convolution (cuDNN, algorithm search; f32 or bf16)
//   cuda_linear.cpp     linear (cuBLAS: sgemm, or GemmEx on bf16 copies)
//   cuda_norm_pool.cpp  pooling and batch norm (cuDNN), LRN (custom kernel)
//   cuda_kernels.cu     the custom kernels (cuda_kernels.hpp declares them)
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
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

  // The device: its name and compute capability (read once, at construction).
  const std::string& device_name() const { return device_name_; }
  int cc_major() const { return cc_major_; }
  int cc_minor() const { return cc_minor_; }

  // The shared workspace, grown to at least `bytes` (never above the budget
  // unless asked for more by a caller that checked).
  void* workspace(size_t bytes);
  size_t workspace_size() const { return ws_size_; }

  // Scratch for the bf16 copies of activations that the conv and linear
  // kernels make per call (bf16 elements as uint16_t bit patterns): one
  // buffer cut into parts of the given element counts, each 256-byte aligned
  // (a count of 0 gives nullptr). Shared by every kernel of the backend: all
  // their work is ordered on the default stream, so one kernel's use of it
  // ends before the next kernel's begins. The parts stay valid until the next
  // bf16_scratch() call; the buffer grows (never shrinks) like workspace().
  struct Bf16Parts {
    uint16_t* p[4] = {};
  };
  Bf16Parts bf16_scratch(std::initializer_list<size_t> counts);
  size_t bf16_scratch_size() const { return scratch_size_; }

  // Convolution reports (cuda_backend.hpp); kernels update their own row.
  size_t add_report(const ConvLayerReport& r);
  void set_report(size_t row, const ConvLayerReport& r);
  std::vector<ConvLayerReport> reports() const;

 private:
  CudaOptions opt_;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::string device_name_;
  int cc_major_ = 0, cc_minor_ = 0;
  void* ws_ = nullptr;
  size_t ws_size_ = 0;
  void* scratch_ = nullptr;
  size_t scratch_size_ = 0;
  mutable std::mutex mu_;
  std::vector<ConvLayerReport> reports_;
};

using ContextPtr = std::shared_ptr<Context>;

// The scaling factors α = 1, β = 0 that cuDNN and cuBLAS read through host
// pointers (float for f32 and bf16 data alike).
inline constexpr float kOne = 1.0f, kZero = 0.0f;

// Device memory of `bytes` (at least 256), zero-filled, freed by the deleter.
std::shared_ptr<float> device_alloc(size_t bytes);

// A kernel's bf16 copy of its float32 weights (count elements, device memory),
// for the bf16 convolutions and GEMMs (KernelExec::precision).
class Bf16Weights {
 public:
  explicit Bf16Weights(size_t count);
  // Casts w: forward() calls this every time (the optimizer may have changed w).
  const uint16_t* cast(const float* w);
  // The copy of w without casting again when the last cast() was of the same
  // pointer: backward follows forward on the same, unmodified weights
  // (backend.hpp), so backward reuses forward's copy; another pointer is cast.
  const uint16_t* of(const float* w) { return w == of_ ? data() : cast(w); }

 private:
  const uint16_t* data() const { return reinterpret_cast<const uint16_t*>(store_.get()); }
  size_t count_;
  std::shared_ptr<float> store_;
  const float* of_ = nullptr;  // the weights the copy holds
};

// RAII cuDNN descriptors.
struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  // [n, c, h, w] NCHW of element type t (CUDNN_DATA_FLOAT or CUDNN_DATA_BFLOAT16)
  TensorDesc(int n, int c, int h, int w, cudnnDataType_t t = CUDNN_DATA_FLOAT);
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
