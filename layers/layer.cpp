// layers/layer.cpp — the layer kinds: shape logic, parameters, and calls into
// the backend's kernels. No arithmetic lives here.
#include <cmath>

#include "core/error.hpp"
#include "layers/layer_kinds.hpp"

namespace dtrain::layers {

void Layer::bind(Backend* backend, std::vector<Tensor> params, std::vector<Tensor> grads,
                 std::vector<Tensor> buffers) {
  backend_ = backend;
  params_ = std::move(params);
  grads_ = std::move(grads);
  buffers_ = std::move(buffers);
  kernel_n_ = -1;
}

void Layer::ensure_batch(int n) {
  DT_CHECK(backend_ != nullptr, "layer ", name_, " used before Net::finalize()");
  if (n != kernel_n_) {
    make_kernels(n);
    kernel_n_ = n;
  }
}

namespace {

// A kernel descriptor with the input's [C, H, W] and the minibatch n filled in
// (every descriptor of backend.hpp starts with n, c, h, w).
template <typename Desc>
Desc nchw_desc(const Shape& x, int n) {
  Desc d;
  d.n = n;
  d.c = static_cast<int>(x.c());
  d.h = static_cast<int>(x.h());
  d.w = static_cast<int>(x.w());
  return d;
}

// ---- convolution ---------------------------------------------------------------
class Conv final : public Layer {
 public:
  Conv(std::string name, ConvOptions o) : Layer(std::move(name)), o_(o) {}
  std::string kind() const override { return "conv"; }
  Shape setup(const std::vector<Shape>& in) override {
    in_shapes_ = in;
    const Shape& x = in[0];
    DT_CHECK(x.c() % o_.groups == 0 && o_.out_channels % o_.groups == 0, name_, ": channels ",
             x.c(), "→", o_.out_channels, " not divisible by groups ", o_.groups);
    desc_ = desc(static_cast<int>(x.n()));
    DT_CHECK(desc_.out_h() > 0 && desc_.out_w() > 0, name_, ": input ", x.str(), " too small");
    out_shape_ = Shape(x.n(), o_.out_channels, desc_.out_h(), desc_.out_w());
    return out_shape_;
  }
  std::vector<ParamSpec> param_specs() const override {
    int64_t cin = in_shapes_[0].c() / o_.groups;
    int64_t fan_in = cin * o_.kernel * o_.kernel;
    int64_t fan_out = o_.out_channels / o_.groups * o_.kernel * o_.kernel;
    std::vector<ParamSpec> p{{"weight", Shape(o_.out_channels, cin, o_.kernel, o_.kernel),
                              o_.weight_init, fan_in, fan_out, false}};
    if (o_.bias) p.push_back({"bias", Shape::vec(o_.out_channels), o_.bias_init, fan_in, fan_out, true});
    return p;
  }
  void forward(const std::vector<const Tensor*>& in, Tensor& out, bool) override {
    ensure_batch(static_cast<int>(in[0]->shape().n()));
    kernel_->forward(in[0]->data(), params_[0].data(), o_.bias ? params_[1].data() : nullptr,
                     out.data());
  }
  void backward(const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dout,
                const std::vector<float*>& din) override {
    kernel_->backward(in[0]->data(), params_[0].data(), dout.data(), din[0], grads_[0].data(),
                      o_.bias ? grads_[1].data() : nullptr);
  }
  double forward_flops() const override {
    return 2.0 * out_shape_.numel() * (in_shapes_[0].c() / o_.groups) * o_.kernel * o_.kernel;
  }

 private:
  ConvDesc desc(int n) const {
    ConvDesc d = nchw_desc<ConvDesc>(in_shapes_[0], n);
    d.k = o_.out_channels;
    d.kh = d.kw = o_.kernel;
    d.stride_h = d.stride_w = o_.stride;
    d.pad_h = d.pad_w = o_.pad;
    d.groups = o_.groups;
    d.bias = o_.bias;
    return d;
  }
  void make_kernels(int n) override { kernel_ = backend_->conv(desc(n)); }
  ConvOptions o_;
  ConvDesc desc_;
  std::unique_ptr<ConvKernel> kernel_;
};

// ---- pooling (also global average pooling) ------------------------------------
class Pool final : public Layer {
 public:
  Pool(std::string name, PoolOptions o, bool global) : Layer(std::move(name)), o_(o), global_(global) {}
  std::string kind() const override { return global_ ? "global_avg_pool" : (o_.kind == PoolKind::max ? "max_pool" : "avg_pool"); }
  Shape setup(const std::vector<Shape>& in) override {
    in_shapes_ = in;
    PoolDesc d = desc(static_cast<int>(in[0].n()));
    DT_CHECK(d.out_h() > 0 && d.out_w() > 0, name_, ": input ", in[0].str(), " too small");
    out_shape_ = Shape(in[0].n(), in[0].c(), d.out_h(), d.out_w());
    return out_shape_;
  }
  void forward(const std::vector<const Tensor*>& in, Tensor& out, bool) override {
    ensure_batch(static_cast<int>(in[0]->shape().n()));
    kernel_->forward(in[0]->data(), out.data());
  }
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<float*>& din) override {
    if (din[0]) kernel_->backward(in[0]->data(), out.data(), dout.data(), din[0]);
  }
  double forward_flops() const override {
    PoolDesc d = desc(1);
    return static_cast<double>(out_shape_.numel()) * d.kh * d.kw;
  }

 private:
  PoolDesc desc(int n) const {
    PoolDesc d = nchw_desc<PoolDesc>(in_shapes_[0], n);
    if (global_) {
      d.kind = PoolKind::avg;
      d.kh = d.h;
      d.kw = d.w;
      d.stride_h = d.h;
      d.stride_w = d.w;
      d.pad_h = d.pad_w = 0;
    } else {
      d.kind = o_.kind;
      d.kh = d.kw = o_.kernel;
      d.stride_h = d.stride_w = o_.stride;
      d.pad_h = d.pad_w = o_.pad;
    }
    return d;
  }
  void make_kernels(int n) override { kernel_ = backend_->pool(desc(n)); }
  PoolOptions o_;
  bool global_;
  std::unique_ptr<PoolKernel> kernel_;
};

// ---- LRN -----------------------------------------------------------------------
class Lrn final : public Layer {
 public:
  Lrn(std::string name, LrnOptions o) : Layer(std::move(name)), o_(o) {}
  std::string kind() const override { return "lrn"; }
  Shape setup(const std::vector<Shape>& in) override {
    in_shapes_ = in;
    out_shape_ = in[0];
    return out_shape_;
  }
  void forward(const std::vector<const Tensor*>& in, Tensor& out, bool) override {
    ensure_batch(static_cast<int>(in[0]->shape().n()));
    kernel_->forward(in[0]->data(), out.data());
  }
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<float*>& din) override {
    if (din[0]) kernel_->backward(in[0]->data(), out.data(), dout.data(), din[0]);
  }
  double forward_flops() const override { return 3.0 * out_shape_.numel() * o_.size; }

 private:
  void make_kernels(int n) override {
    LrnDesc d = nchw_desc<LrnDesc>(in_shapes_[0], n);
    d.size = o_.size;
    d.alpha = o_.alpha;
    d.beta = o_.beta;
    d.k = o_.k;
    kernel_ = backend_->lrn(d);
  }
  LrnOptions o_;
  std::unique_ptr<LrnKernel> kernel_;
};

// ---- batch normalisation -------------------------------------------------------
class BatchNorm final : public Layer {
 public:
  BatchNorm(std::string name, BatchNormOptions o) : Layer(std::move(name)), o_(o) {}
  std::string kind() const override { return "batch_norm"; }
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
    kernel_ = backend_->batch_norm(d);
  }
  BatchNormOptions o_;
  std::unique_ptr<BatchNormKernel> kernel_;
};

// ---- elementwise layers ----------------------------------------------------------
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

class Dropout final : public Layer {
 public:
  Dropout(std::string name, float p) : Layer(std::move(name)), p_(p) {
    DT_CHECK(p >= 0.0f && p < 1.0f, name_, ": dropout probability ", p, " outside [0, 1)");
  }
  std::string kind() const override { return "dropout"; }
  Shape setup(const std::vector<Shape>& in) override { return out_shape_ = in[0]; }
  void forward(const std::vector<const Tensor*>& in, Tensor& out, bool train) override {
    size_t count = static_cast<size_t>(out.numel());
    if (!train || p_ == 0.0f) {
      backend_->copy(in[0]->data(), out.data(), count);
      return;
    }
    if (mask_count_ < count) {
      mask_ = backend_->allocate(count);
      mask_count_ = count;
    }
    backend_->dropout_forward(in[0]->data(), out.data(), mask_.get(), count, p_, seed_);
  }
  void backward(const std::vector<const Tensor*>&, const Tensor& out, const Tensor& dout,
                const std::vector<float*>& din) override {
    if (!din[0]) return;
    size_t count = static_cast<size_t>(out.numel());
    if (p_ == 0.0f)
      backend_->copy(dout.data(), din[0], count);
    else
      backend_->dropout_backward(mask_.get(), dout.data(), din[0], count);
  }

 private:
  float p_;
  std::shared_ptr<float> mask_;
  size_t mask_count_ = 0;
};

class Linear final : public Layer {
 public:
  Linear(std::string name, LinearOptions o) : Layer(std::move(name)), o_(o) {}
  std::string kind() const override { return "linear"; }
  Shape setup(const std::vector<Shape>& in) override {
    in_shapes_ = in;
    return out_shape_ = Shape::flat(in[0].n(), o_.out_features);
  }
  std::vector<ParamSpec> param_specs() const override {
    int64_t fin = in_shapes_[0].per_sample();
    std::vector<ParamSpec> p{{"weight", Shape::flat(o_.out_features, fin), o_.weight_init, fin,
                              o_.out_features, false}};
    if (o_.bias) p.push_back({"bias", Shape::vec(o_.out_features), o_.bias_init, fin, o_.out_features, true});
    return p;
  }
  void forward(const std::vector<const Tensor*>& in, Tensor& out, bool) override {
    ensure_batch(static_cast<int>(in[0]->shape().n()));
    kernel_->forward(in[0]->data(), params_[0].data(), o_.bias ? params_[1].data() : nullptr, out.data());
  }
  void backward(const std::vector<const Tensor*>& in, const Tensor&, const Tensor& dout,
                const std::vector<float*>& din) override {
    kernel_->backward(in[0]->data(), params_[0].data(), dout.data(), din[0], grads_[0].data(),
                      o_.bias ? grads_[1].data() : nullptr);
  }
  double forward_flops() const override {
    return 2.0 * in_shapes_[0].n() * in_shapes_[0].per_sample() * o_.out_features;
  }

 private:
  void make_kernels(int n) override {
    LinearDesc d;
    d.n = n;
    d.in = static_cast<int>(in_shapes_[0].per_sample());
    d.out = o_.out_features;
    d.bias = o_.bias;
    kernel_ = backend_->linear(d);
  }
  LinearOptions o_;
  std::unique_ptr<LinearKernel> kernel_;
};

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

std::unique_ptr<Layer> make_conv(std::string name, ConvOptions o) { return std::make_unique<Conv>(std::move(name), o); }
std::unique_ptr<Layer> make_pool(std::string name, PoolOptions o) { return std::make_unique<Pool>(std::move(name), o, false); }
std::unique_ptr<Layer> make_global_avg_pool(std::string name) { return std::make_unique<Pool>(std::move(name), PoolOptions{}, true); }
std::unique_ptr<Layer> make_lrn(std::string name, LrnOptions o) { return std::make_unique<Lrn>(std::move(name), o); }
std::unique_ptr<Layer> make_batch_norm(std::string name, BatchNormOptions o) { return std::make_unique<BatchNorm>(std::move(name), o); }
std::unique_ptr<Layer> make_relu(std::string name) { return std::make_unique<Relu>(std::move(name)); }
std::unique_ptr<Layer> make_dropout(std::string name, float p) { return std::make_unique<Dropout>(std::move(name), p); }
std::unique_ptr<Layer> make_linear(std::string name, LinearOptions o) { return std::make_unique<Linear>(std::move(name), o); }
std::unique_ptr<Layer> make_flatten(std::string name) { return std::make_unique<Flatten>(std::move(name)); }
std::unique_ptr<Layer> make_add(std::string name) { return std::make_unique<Add>(std::move(name)); }

}  // namespace dtrain::layers
