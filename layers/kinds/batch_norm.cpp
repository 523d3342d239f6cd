// layers/kinds/batch_norm.cpp — parameters, buffers and kernel calls of batch normalisation.
#include "layers/kinds/batch_norm.hpp"

#include "core/error.hpp"

namespace dtrain::layers {

namespace {

class BatchNorm final : public Layer {
 public:
  BatchNorm(std::string name, BatchNormOptions o) : Layer(std::move(name)), o_(o) {}
  std::string kind() const override { return "batch_norm"; }
  bool fuses_relu() const override { return true; }
  PlanOut plan(const PlanIn& p) override { return plan_kernel(p, kernel_); }
  Shape setup(const std::vector<Shape>& in) override {
    in_shapes_ = in;
    out_shape_ = in[0];
    return out_shape_;
  }
  std::vector<ParamSpec> param_specs() const override {
    int64_t c = in_shapes_[0].c();
    return {{"gamma", Shape::vec(c), o_.gamma_init, 1, 1, true},
            {"beta", Shape::vec(c), Init::zeros, 1, 1, true}};
  }
  std::vector<ParamSpec> buffer_specs() const override {
    int64_t c = in_shapes_[0].c();
    return {{"running_mean", Shape::vec(c), Init::zeros, 1, 1, true},
            {"running_var", Shape::vec(c), Init::ones, 1, 1, true}};
  }
  void forward(const std::vector<const Tensor*>& in, Tensor& out, bool train) override {
    ensure_batch(static_cast<int>(in[0]->shape().n()));
    if (train)
      kernel_->forward_train(in[0]->data(), params_[0].data(), params_[1].data(), out.data(),
                             buffers_[0].data(), buffers_[1].data());
    else
      kernel_->forward_infer(in[0]->data(), params_[0].data(), params_[1].data(),
                             buffers_[0].data(), buffers_[1].data(), out.data());
  }
  void backward(const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dout,
                const std::vector<float*>& din) override {
    kernel_->backward(in[0]->data(), dout.data(), params_[0].data(), din[0], grads_[0].data(),
                      grads_[1].data());
  }
  double forward_flops() const override { return 4.0 * out_shape_.numel(); }

 private:
  void make_kernels(int n) override {
    BatchNormDesc d = nchw_desc<BatchNormDesc>(in_shapes_[0], n);
    d.eps = o_.eps;
    d.momentum = o_.momentum;
    d.exec = exec_;
    kernel_ = backend_->batch_norm(d);
  }
  BatchNormOptions o_;
  std::unique_ptr<BatchNormKernel> kernel_;
};

}  // namespace

std::unique_ptr<Layer> make_batch_norm(std::string name, BatchNormOptions o) { return std::make_unique<BatchNorm>(std::move(name), o); }

}  // namespace dtrain::layers
