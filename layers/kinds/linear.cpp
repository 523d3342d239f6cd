// layers/kinds/linear.cpp — parameters and kernel calls of the fully connected layer.
#include "layers/kinds/linear.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "core/error.hpp"
#include "core/sum_squares.hpp"
#include "layers/format.hpp"
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
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<float*>& din) override {
    WeightedKernelLayer::backward(in, out, dout, din);
    bound_ = bound_grads_ ? bound_grads(*in[0], dout) : std::numeric_limits<double>::infinity();
  }
  std::optional<double> grads_bound() const override { return bound_; }

 private:
  // dW[o][i] = Σ_n dy[n][o]·x[n][i] and db[o] = Σ_n dy[n][o]. Every partial
  // sum of either, in any order the kernel adds them, is at most
  // Σ_n |dy[n][o]|·|x[n][i]| ≤ ‖dy‖·‖x‖ (Cauchy–Schwarz; ‖·‖ the Frobenius
  // norm over the minibatch), resp. √N·‖dy‖; and every element of x and dy
  // is at most ‖x‖ resp. ‖dy‖, so a kernel that rounds them (a bf16 layer
  // rounds the f32 dy of the net's output itself; oneDNN's bf16 fpmath mode
  // would round f32 operands) cannot make an Inf of them. The largest of the
  // four is the bound returned, before float rounding (kGradBoundLimit's
  // margin): below the limit, no operand, product or sum overflows and no NaN
  // can arise (that needs an Inf or NaN operand), so dW and db are finite.
  // Two reads of the minibatch's activations (x [N, IN], dy [N, OUT]) stand
  // in for a read of the weight gradient [OUT, IN]: for AlexNet-OWT's fc6 at
  // minibatch 16, 0.8 MB instead of 151 MB. Host memory and plain (float32
  // or bf16) activations only, else +Inf.
  double bound_grads(const Tensor& x, const Tensor& dy) const {
    constexpr double inf = std::numeric_limits<double>::infinity();
    if (backend_->discrete_memory() || !x.format().is_plain() || !dy.format().is_plain()) return inf;
    const double sx = squares(x), sdy = squares(dy);
    const double n = static_cast<double>(x.shape().n());
    if (!std::isfinite(sx) || !std::isfinite(sdy) || n > 65536) return inf;
    const double nx = std::sqrt(sx), ndy = std::sqrt(sdy);
    return std::max({nx * ndy, std::sqrt(n) * ndy, nx, ndy});
  }
  // Σ v² of a plain float32 or bf16 tensor, in double; non-finite when any v is.
  static double squares(const Tensor& t) {
    const size_t n = static_cast<size_t>(t.numel());
    if (t.format().dtype == DType::f32) return sum_squares(t.data(), n);
    const auto* b = reinterpret_cast<const uint16_t*>(t.data());
    double s = 0;
    for (size_t i = 0; i < n; ++i) {
      const double v = from_bf16(b[i]);
      s += v * v;
    }
    return s;
  }
  double bound_ = std::numeric_limits<double>::infinity();  // grads_bound(): none before a backward


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
