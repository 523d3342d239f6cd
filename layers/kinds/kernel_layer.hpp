// layers/kinds/kernel_layer.hpp — the two layer shapes that share a kernel
// interface (backend.hpp): a layer over a UnaryKernel (pooling, LRN: x → y)
// and a layer over a WeightedKernel (convolution, linear: x, weight, bias → y).
// They own the kernel and its forward/backward calls; a kind adds its shapes,
// parameters and the descriptor it builds in make_kernels() (with exec_, so
// the kernel chooses the formats plan() reports).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layers/layer.hpp"

namespace dtrain::layers {

// x [N, …] → y; backward: dx (skipped when not needed).
class UnaryKernelLayer : public Layer {
 public:
  using Layer::Layer;
  PlanOut plan(const PlanIn& p) override { return plan_kernel(p, kernel_); }
  void forward(const std::vector<const Tensor*>& in, Tensor& out, bool) override {
    ensure_batch(static_cast<int>(in[0]->shape().n()));
    kernel_->forward(in[0]->data(), out.data());
  }
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<float*>& din) override {
    if (din[0]) kernel_->backward(in[0]->data(), out.data(), dout.data(), din[0]);
  }

 protected:
  std::unique_ptr<UnaryKernel> kernel_;
};

// x, params_[0] = weight, params_[1] = bias (when bias_) → y; backward: dx, dweight, dbias.
class WeightedKernelLayer : public Layer {
 public:
  WeightedKernelLayer(std::string name, bool bias) : Layer(std::move(name)), bias_(bias) {}
  bool fuses_relu() const override { return true; }
  PlanOut plan(const PlanIn& p) override { return plan_kernel(p, kernel_); }
  void forward(const std::vector<const Tensor*>& in, Tensor& out, bool) override {
    ensure_batch(static_cast<int>(in[0]->shape().n()));
    kernel_->use_weights_bf16(params_bf16_);  // the weight is the layer's first parameter
    kernel_->forward(in[0]->data(), params_[0].data(), bias_ ? params_[1].data() : nullptr, out.data());
  }
  void backward(const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dout,
                const std::vector<float*>& din) override {
    kernel_->backward(in[0]->data(), params_[0].data(), dout.data(), din[0], grads_[0].data(),
                      bias_ ? grads_[1].data() : nullptr);
  }

 protected:
  bool bias_;
  std::unique_ptr<WeightedKernel> kernel_;
};

}  // namespace dtrain::layers
