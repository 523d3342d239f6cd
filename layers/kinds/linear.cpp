// layers/kinds/linear.cpp — parameters and kernel calls of the fully connected layer.
#include "layers/kinds/linear.hpp"

#include "core/error.hpp"
#include "layers/kinds/kernel_layer.hpp"

namespace dtrain::layers {

namespace {

class Linear final : public WeightedKernelLayer {
 public:
  Linear(std::string name, LinearOptions o) : WeightedKernelLayer(std::move(name), o.bias), o_(o) {}
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
    d.exec = exec_;
    kernel_ = backend_->linear(d);
  }
  LinearOptions o_;
};

}  // namespace

std::unique_ptr<Layer> make_linear(std::string name, LinearOptions o) { return std::make_unique<Linear>(std::move(name), o); }

}  // namespace dtrain::layers
