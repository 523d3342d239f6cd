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
  void forward(const std::vector<const Tensor*>& in, Tensor& out, bool) override {
    backend_->copy(in[0]->data(), out.data(), static_cast<size_t>(out.numel()));
  }
  void backward(const std::vector<const Tensor*>&, const Tensor& out, const Tensor& dout,
                const std::vector<float*>& din) override {
    if (din[0]) backend_->copy(dout.data(), din[0], static_cast<size_t>(out.numel()));
  }
};

}  // namespace

std::unique_ptr<Layer> make_flatten(std::string name) { return std::make_unique<Flatten>(std::move(name)); }

}  // namespace dtrain::layers
