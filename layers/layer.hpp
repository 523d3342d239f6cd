// layers/layer.hpp — a layer of the Net: shapes, parameters and kernels.
//
// A layer is set up once with its input shapes (N = the minibatch it was built
// for), declares its trainable parameters and non-trainable buffers (batch-norm
// running statistics), and receives views into the Net's arenas. Its kernels
// come from the Backend and are re-created when the minibatch size changes
// (the last, partial evaluation batch).
//
// Gradient semantics follow backend.hpp: backward() OVERWRITES din[i] (nullptr:
// not needed) and the parameter gradients.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layers/backend.hpp"
#include "layers/tensor.hpp"

namespace dtrain::layers {

// How a parameter is initialised (deterministic from the Net's seed).
enum class Init {
  zeros,
  ones,
  uniform_fan_in,   // U(−1/√fan_in, 1/√fan_in): torch's default for Conv2d/Linear
  kaiming_normal,   // N(0, 2/fan_out): torchvision ResNet convolutions (He et al. 2015)
  normal_001,       // N(0, 0.01²): Caffe's AlexNet weights
};

struct ParamSpec {
  std::string name;  // "weight", "bias", "running_mean", …
  Shape shape;
  Init init = Init::zeros;
  int64_t fan_in = 1, fan_out = 1;
  bool no_decay = false;  // a bias or a batch-norm parameter (weight decay optional)
};

// A kernel descriptor with the input x [N, C, H, W]'s C, H, W and the
// minibatch n filled in (every descriptor of backend.hpp starts with n, c, h, w).
template <typename Desc>
Desc nchw_desc(const Shape& x, int n) {
  Desc d;
  d.n = n;
  d.c = static_cast<int>(x.c());
  d.h = static_cast<int>(x.h());
  d.w = static_cast<int>(x.w());
  return d;
}

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  virtual std::string kind() const = 0;
  virtual int num_inputs() const { return 1; }

  // in: input shapes (N included) → output shape. Throws Error on a shape the layer cannot take.
  virtual Shape setup(const std::vector<Shape>& in) = 0;
  virtual std::vector<ParamSpec> param_specs() const { return {}; }
  virtual std::vector<ParamSpec> buffer_specs() const { return {}; }
  // Views into the arenas, in the order of the specs.
  void bind(Backend* backend, std::vector<Tensor> params, std::vector<Tensor> grads,
            std::vector<Tensor> buffers);

  virtual void forward(const std::vector<const Tensor*>& in, Tensor& out, bool train) = 0;
  virtual void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                        const std::vector<float*>& din) = 0;

  // Forward floating-point operations for the set-up shapes (multiply-add = 2).
  virtual double forward_flops() const { return 0.0; }
  // Seed for stochastic layers (dropout), set by the Net each step.
  void set_seed(uint64_t seed) { seed_ = seed; }

  const std::vector<Tensor>& params() const { return params_; }
  const std::vector<Tensor>& grads() const { return grads_; }
  const std::vector<Tensor>& buffers() const { return buffers_; }

 protected:
  // Re-creates the kernels for minibatch n when it differs from the last one.
  void ensure_batch(int n);
  virtual void make_kernels(int n) { (void)n; }

  std::string name_;
  Backend* backend_ = nullptr;
  std::vector<Tensor> params_, grads_, buffers_;
  std::vector<Shape> in_shapes_;
  Shape out_shape_;
  int kernel_n_ = -1;
  uint64_t seed_ = 0;
};

}  // namespace dtrain::layers
