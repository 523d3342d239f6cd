// layers/kinds/add.cpp — the residual add through the backend's elementwise functions.
#include "layers/kinds/add.hpp"

#include "core/error.hpp"

namespace dtrain::layers {

namespace {

class Add final : public Layer {
 public:
  using Layer::Layer;
  std::string kind() const override { return "add"; }
  int num_inputs() const override { return 2; }
  Shape setup(const std::vector<Shape>& in) override {
    DT_CHECK(in.size() == 2 && in[0] == in[1], name_, ": residual add of ", in[0].str(), " and ",
             in.size() > 1 ? in[1].str() : "nothing");
    return out_shape_ = in[0];
  }
  void forward(const std::vector<const Tensor*>& in, Tensor& out, bool) override {
    backend_->add(in[0]->data(), in[1]->data(), out.data(), static_cast<size_t>(out.numel()));
  }
  void backward(const std::vector<const Tensor*>&, const Tensor& out, const Tensor& dout,
                const std::vector<float*>& din) override {
    for (float* d : din)
      if (d) backend_->copy(dout.data(), d, static_cast<size_t>(out.numel()));
  }
  double forward_flops() const override { return static_cast<double>(out_shape_.numel()); }
};

}  // namespace

std::unique_ptr<Layer> make_add(std::string name) { return std::make_unique<Add>(std::move(name)); }

}  // namespace dtrain::layers
