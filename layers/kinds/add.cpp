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
  bool fuses_relu() const override { return true; }
  Shape setup(const std::vector<Shape>& in) override {
    DT_CHECK(in.size() == 2 && in[0] == in[1], name_, ": residual add of ", in[0].str(), " and ",
             in.size() > 1 ? in[1].str() : "nothing");
    return out_shape_ = in[0];
  }
  // The first input's format for both inputs and the output; a fused ReLU
  // is applied in the same pass, and its mask in backward's.
  PlanOut plan(const PlanIn& p) override {
    fmt_ = p.inputs[0];
    relu_ = p.relu;
    return {{fmt_, fmt_}, fmt_, relu_};
  }
  void forward(const std::vector<const Tensor*>& in, Tensor& out, bool) override {
    backend_->sum(*in[0], *in[1], out, relu_);
  }
  void backward(const std::vector<const Tensor*>&, const Tensor& out, const Tensor& dout,
                const std::vector<float*>& din) override {
    for (float* d : din) {
      if (!d) continue;
      Tensor dx = Tensor::view(d, out.shape(), fmt_, out.device());
      if (relu_)
        backend_->relu_grad(out, dout, dx);
      else
        backend_->convert(dout, dx);
    }
  }
  double forward_flops() const override { return static_cast<double>(out_shape_.numel()); }

 private:
  Format fmt_;
  bool relu_ = false;
};

}  // namespace

std::unique_ptr<Layer> make_add(std::string name) { return std::make_unique<Add>(std::move(name)); }

}  // namespace dtrain::layers
