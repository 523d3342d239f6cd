// layers/kinds/linear.cpp — parameters and kernel calls of the fully connected layer.
#include "layers/kinds/linear.hpp"

#include <cfloat>
#include <cmath>
#include <cstdint>

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
    proven_ = prove_grads_finite(*in[0], dout);
  }
  bool grads_proven_finite() const override { return proven_; }

 private:
  // dW[o][i] = Σ_n dy[n][o]·x[n][i] and db[o] = Σ_n dy[n][o]. Every partial
  // sum of either, in any order the kernel adds them, is at most
  // Σ_n |dy[n][o]|·|x[n][i]| ≤ ‖dy‖·‖x‖ (Cauchy–Schwarz; ‖·‖ the Frobenius
  // norm over the minibatch), resp. √N·‖dy‖; float rounding adds a factor
  // below (1 + 2⁻²⁴)^(2N+2) < 1.01 for N ≤ 65536. So when x and dy are finite
  // and both bounds are under FLT_MAX/4, no product or sum overflows and no
  // NaN can arise (that needs an Inf or NaN operand): dW and db are finite.
  // Two reads of the minibatch's activations (x [N, IN], dy [N, OUT]) stand
  // in for a read of the weight gradient [OUT, IN]: for AlexNet-OWT's fc6 at
  // minibatch 16, 0.8 MB instead of 151 MB. Host memory and plain (float32
  // or bf16) activations only; others are not proven, so checked. In bf16 the
  // kernel's operands are x and dy as stored, added in float32.
  bool prove_grads_finite(const Tensor& x, const Tensor& dy) const {
    if (backend_->discrete_memory() || !x.format().is_plain() || !dy.format().is_plain()) return false;
    const double sx = squares(x), sdy = squares(dy);
    if (!std::isfinite(sx) || !std::isfinite(sdy)) return false;
    const double limit = static_cast<double>(FLT_MAX) / 4;
    const double n = static_cast<double>(x.shape().n());
    return n <= 65536 && std::sqrt(sx) * std::sqrt(sdy) < limit && std::sqrt(n * sdy) < limit;
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
  bool proven_ = false;


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
