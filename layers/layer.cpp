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

}  // namespace dtrain::layers
