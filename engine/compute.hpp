// engine/compute.hpp — a worker's compute backend and the buffers one step
// feeds it, shared by the trainer and the tuner's profiler (so `dtrain tune
// --device cuda` measures T_C through the same device path as `dtrain train`).
#pragma once

#include <cstdint>
#include <memory>

#include "engine/config.hpp"
#include "layers/backend.hpp"
#include "layers/tensor.hpp"

namespace dtrain::engine {

// The backend `cfg.device` names: cpu (oneDNN/BLAS, or the plain-loop
// reference with cfg.reference_kernels), cpu_staged (those kernels behind a
// device memory model, layers/cpu/staged.hpp) or cuda on GPU `cuda_device`
// with the job's workspace budget (--workspace-mb) and --tf32, logging its
// algorithm choices when `log`. Throws UsageError for cuda in a build without
// it; binding checks are the caller's (comm::check_device_binding).
std::unique_ptr<layers::Backend> make_compute_backend(const TrainConfig& cfg, int cuda_device, bool log);

// Bytes of device scratch the backend holds now beside the net's tensors:
// the convolution workspace (cuDNN's chosen algorithms, within
// --workspace-mb) and, with --precision bf16 on cuda, the shared buffer of
// the bf16 activation copies; 0 on the CPU backends.
size_t workspace_bytes(const layers::Backend& backend);

// What one step (or one evaluation batch) feeds the net, in the backend's
// memory: the minibatch x [n, C, H, W], its labels [n], the probabilities and
// the loss gradient [n, K]. On a host backend x and labels are the caller's
// buffers (no copy); on a device they are uploaded.
class StepBuffers {
 public:
  StepBuffers(layers::Backend& be, int64_t n, const layers::Shape& in, int k)
      : be_(be), in_(in), k_(k) {
    probs_ = be.allocate(static_cast<size_t>(n * k));
    dlogits_ = be.allocate(static_cast<size_t>(n * k));
    if (be.discrete_memory()) {
      x_ = be.allocate(static_cast<size_t>(n * in.per_sample()));
      labels_ = be.allocate(static_cast<size_t>(n));  // int32 in float-sized slots
    }
  }
  // host_x: [b, C, H, W] host floats, b ≤ n; returns the net's input.
  layers::Tensor x(const float* host_x, int64_t b) {
    const layers::Shape s(b, in_.c(), in_.h(), in_.w());
    if (!x_) return layers::Tensor::view(const_cast<float*>(host_x), s);
    be_.upload(host_x, x_.get(), static_cast<size_t>(s.numel()) * sizeof(float));
    return layers::Tensor::view(x_.get(), s, be_.device());
  }
  const int32_t* labels(const int32_t* host, int64_t b) {
    if (!labels_) return host;
    be_.upload(host, labels_.get(), static_cast<size_t>(b) * sizeof(int32_t));
    return reinterpret_cast<const int32_t*>(labels_.get());
  }
  float* probs() { return probs_.get(); }
  layers::Tensor dlogits(int64_t b) {
    return layers::Tensor::view(dlogits_.get(), layers::Shape::flat(b, k_), be_.device());
  }

 private:
  layers::Backend& be_;
  layers::Shape in_;
  int k_;
  std::shared_ptr<float> x_, labels_, probs_, dlogits_;
};

}  // namespace dtrain::engine
