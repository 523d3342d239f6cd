// layers/layer.cpp — what every layer kind shares: binding to the arenas and
// re-creating kernels for a new minibatch. The kinds live in layers/kinds/.
#include "layers/layer.hpp"

#include "core/error.hpp"

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

KernelExec Layer::exec_of(const PlanIn& p) {
  KernelExec e;
  e.src = p.inputs.empty() ? Format{} : p.inputs[0];
  e.precision = p.precision;
  e.any_format = p.any_format;
  e.channels_last = p.channels_last;
  e.relu = p.relu;
  e.float_out = p.float_out;
  return e;
}

PlanOut Layer::plan(const PlanIn& p) {
  DT_CHECK(backend_ != nullptr, "layer ", name_, " planned before Net::finalize()");
  exec_ = exec_of(p);
  exec_.any_format = false;
  exec_.relu = false;
  make_kernels(p.n);
  kernel_n_ = p.n;
  const Format f = Format::plain(p.inputs.empty() ? DType::f32 : p.inputs[0].dtype);
  return {std::vector<Format>(p.inputs.size(), f), f, false};
}

}  // namespace dtrain::layers
