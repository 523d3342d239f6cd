// layers/kinds/relu.cpp — ReLU through the backend's elementwise functions.
#include "layers/kinds/relu.hpp"

#include "core/error.hpp"

namespace dtrain::layers {

namespace {

class Relu final : public Layer {
 public:
  using Layer::Layer;
  std::string kind() const override { return "relu"; }
  Shape setup(const std::vector<Shape>& in) override { return out_shape_ = in[0]; }
  void forward(const std::vector<const Tensor*>& in, Tensor& out, bool) override {
    backend_->relu_forward(in[0]->data(), out.data(), static_cast<size_t>(out.numel()));
  }
  void backward(const std::vector<const Tensor*>&, const Tensor& out, const Tensor& dout,
                const std::vector<float*>& din) override {
    if (din[0]) backend_->relu_backward(out.data(), dout.data(), din[0], static_cast<size_t>(out.numel()));
  }
  double forward_flops() const override { return static_cast<double>(out_shape_.numel()); }
};

}  // namespace

std::unique_ptr<Layer> make_relu(std::string name) { return std::make_unique<Relu>(std::move(name)); }

}  // namespace dtrain::layers
