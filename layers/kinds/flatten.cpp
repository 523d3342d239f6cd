// layers/kinds/flatten.cpp — flatten as a device copy.
#include "layers/kinds/flatten.hpp"

#include "core/error.hpp"

namespace dtrain::layers {

namespace {

class Flatten final : public Layer {
 public:
  using Layer::Layer;
  std::string kind() const override { return "flatten"; }
  Shape setup(const std::vector<Shape>& in) override {
    return out_shape_ = Shape::flat(in[0].n(), in[0].per_sample());
  }
  // (the default plan: plain, in the input's element type)
  void forward(const std::vector<const Tensor*>& in, Tensor& out, bool) override {
    backend_->convert(in[0]->reshaped(out.shape()), out);
  }
  void backward(const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dout,
                const std::vector<float*>& din) override {
    if (!din[0]) return;
    Tensor dx = Tensor::view(din[0], in[0]->shape(), in[0]->format(), in[0]->device());
    backend_->convert(dout.reshaped(dx.shape()), dx);
  }
};

}  // namespace

std::unique_ptr<Layer> make_flatten(std::string name) { return std::make_unique<Flatten>(std::move(name)); }

}  // namespace dtrain::layers
