// layers/kinds/dropout.cpp — inverted dropout: the mask buffer and the backend's dropout
// functions (the mask is a counter-based function of the step seed).
#include "layers/kinds/dropout.hpp"

#include "core/error.hpp"

namespace dtrain::layers {

namespace {

class Dropout final : public Layer {
 public:
  Dropout(std::string name, float p) : Layer(std::move(name)), p_(p) {
    DT_CHECK(p >= 0.0f && p < 1.0f, name_, ": dropout probability ", p, " outside [0, 1)");
  }
  std::string kind() const override { return "dropout"; }
  Shape setup(const std::vector<Shape>& in) override { return out_shape_ = in[0]; }
  // Plain, in the input's element type: the mask is a function of the NCHW index.
  PlanOut plan(const PlanIn& p) override {
    fmt_ = Format::plain(p.inputs[0].dtype);
    return {{fmt_}, fmt_, false};
  }
  void forward(const std::vector<const Tensor*>& in, Tensor& out, bool train) override {
    size_t count = out.stored();
    if (!train || p_ == 0.0f) {
      backend_->convert(*in[0], out);
      return;
    }
    if (mask_count_ < count) {
      mask_ = backend_->allocate(count);
      mask_count_ = count;
    }
    backend_->dropout(*in[0], out, mask_.get(), p_, seed_);
  }
  void backward(const std::vector<const Tensor*>&, const Tensor& out, const Tensor& dout,
                const std::vector<float*>& din) override {
    if (!din[0]) return;
    Tensor dx = Tensor::view(din[0], out.shape(), fmt_, out.device());
    if (p_ == 0.0f)
      backend_->convert(dout, dx);
    else
      backend_->dropout_grad(mask_.get(), dout, dx);
  }

 private:
  float p_;
  Format fmt_;
  std::shared_ptr<float> mask_;
  size_t mask_count_ = 0;
};

}  // namespace

std::unique_ptr<Layer> make_dropout(std::string name, float p) { return std::make_unique<Dropout>(std::move(name), p); }

}  // namespace dtrain::layers
