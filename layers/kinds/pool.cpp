// layers/kinds/pool.cpp — shape logic and kernel calls of pooling (max, average, global
// average: one class, the global kind is a window as large as the input).
#include "layers/kinds/pool.hpp"

#include "core/error.hpp"
#include "layers/kinds/kernel_layer.hpp"

namespace dtrain::layers {

namespace {

class Pool final : public UnaryKernelLayer {
 public:
  Pool(std::string name, PoolOptions o, bool global) : UnaryKernelLayer(std::move(name)), o_(o), global_(global) {}
  std::string kind() const override { return global_ ? "global_avg_pool" : (o_.kind == PoolKind::max ? "max_pool" : "avg_pool"); }
  Shape setup(const std::vector<Shape>& in) override {
    in_shapes_ = in;
    PoolDesc d = desc(static_cast<int>(in[0].n()));
    DT_CHECK(d.out_h() > 0 && d.out_w() > 0, name_, ": input ", in[0].str(), " too small");
    out_shape_ = Shape(in[0].n(), in[0].c(), d.out_h(), d.out_w());
    return out_shape_;
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
    d.exec = exec_;
    return d;
  }
  void make_kernels(int n) override { kernel_ = backend_->pool(desc(n)); }
  PoolOptions o_;
  bool global_;
};

}  // namespace

std::unique_ptr<Layer> make_pool(std::string name, PoolOptions o) { return std::make_unique<Pool>(std::move(name), o, false); }
std::unique_ptr<Layer> make_global_avg_pool(std::string name) { return std::make_unique<Pool>(std::move(name), PoolOptions{}, true); }

}  // namespace dtrain::layers
