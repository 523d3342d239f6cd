// layers/kinds/relu.cpp — ReLU through the backend's elementwise functions.
#include "layers/kinds/relu.hpp"

#include "core/error.hpp"

namespace dtrain::layers {

namespace {

class Relu final : public Layer {
 public:
  using Layer::Layer;
  std::string kind() const override { return "relu"; }
  bool is_relu() const override { return true; }
  Shape setup(const std::vector<Shape>& in) override { return out_shape_ = in[0]; }
  // Any format: the ReLU keeps its input's.
  PlanOut plan(const PlanIn& p) override {
    fmt_ = p.inputs[0];
    return {{fmt_}, fmt_, false};
  }
  void forward(const std::vector<const Tensor*>& in, Tensor& out, bool) override { backend_->relu(*in[0], out); }
  void backward(const std::vector<const Tensor*>&, const Tensor& out, const Tensor& dout,
                const std::vector<float*>& din) override {
    if (!din[0]) return;
    Tensor dx = Tensor::view(din[0], out.shape(), fmt_, out.device());
    backend_->relu_grad(out, dout, dx);
  }
  double forward_flops() const override { return static_cast<double>(out_shape_.numel()); }

 private:
  Format fmt_;
};

}  // namespace

std::unique_ptr<Layer> make_relu(std::string name) { return std::make_unique<Relu>(std::move(name)); }

}  // namespace dtrain::layers
