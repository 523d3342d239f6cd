// layers/kinds/conv.cpp — shape logic, parameters and kernel calls of a convolution
// (the arithmetic is the backend's ConvKernel).
#include "layers/kinds/conv.hpp"

#include "core/error.hpp"
#include "layers/kinds/kernel_layer.hpp"

namespace dtrain::layers {

namespace {

class Conv final : public WeightedKernelLayer {
 public:
  Conv(std::string name, ConvOptions o) : WeightedKernelLayer(std::move(name), o.bias), o_(o) {}
  std::string kind() const override { return "conv"; }
  Shape setup(const std::vector<Shape>& in) override {
    in_shapes_ = in;
    const Shape& x = in[0];
    DT_CHECK(x.c() % o_.groups == 0 && o_.out_channels % o_.groups == 0, name_, ": channels ",
             x.c(), "→", o_.out_channels, " not divisible by groups ", o_.groups);
    const ConvDesc d = desc(static_cast<int>(x.n()));
    DT_CHECK(d.out_h() > 0 && d.out_w() > 0, name_, ": input ", x.str(), " too small");
    out_shape_ = Shape(x.n(), o_.out_channels, d.out_h(), d.out_w());
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
    d.exec = exec_;
    return d;
  }
  void make_kernels(int n) override { kernel_ = backend_->conv(desc(n)); }
  ConvOptions o_;
};

}  // namespace

std::unique_ptr<Layer> make_conv(std::string name, ConvOptions o) { return std::make_unique<Conv>(std::move(name), o); }

}  // namespace dtrain::layers
