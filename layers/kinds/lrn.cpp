// layers/kinds/lrn.cpp — shape logic and kernel calls of LRN.
#include "layers/kinds/lrn.hpp"

#include "core/error.hpp"
#include "layers/kinds/kernel_layer.hpp"

namespace dtrain::layers {

namespace {

class Lrn final : public UnaryKernelLayer {
 public:
  Lrn(std::string name, LrnOptions o) : UnaryKernelLayer(std::move(name)), o_(o) {}
  std::string kind() const override { return "lrn"; }
  Shape setup(const std::vector<Shape>& in) override {
    in_shapes_ = in;
    out_shape_ = in[0];
    return out_shape_;
  }
  double forward_flops() const override { return 3.0 * out_shape_.numel() * o_.size; }

 private:
  void make_kernels(int n) override {
    LrnDesc d = nchw_desc<LrnDesc>(in_shapes_[0], n);
    d.size = o_.size;
    d.alpha = o_.alpha;
    d.beta = o_.beta;
    d.k = o_.k;
    d.exec = exec_;
    kernel_ = backend_->lrn(d);
  }
  LrnOptions o_;
};

}  // namespace

std::unique_ptr<Layer> make_lrn(std::string name, LrnOptions o) { return std::make_unique<Lrn>(std::move(name), o); }

}  // namespace dtrain::layers
