// layers/kinds/batch_norm.hpp — batch normalisation and its options (semantics:
// BatchNormDesc in layers/backend.hpp).
//
// x [N, C, H, W] → y [N, C, H, W]; parameters gamma, beta [C]; buffers
// running_mean, running_var [C].
#pragma once

#include <memory>
#include <string>

#include "layers/layer.hpp"

namespace dtrain::layers {

struct BatchNormOptions {
  float eps = 1e-5f;
  float momentum = 0.1f;
  Init gamma_init = Init::ones;  // ResNet's zero-init of the last BN of a block: Init::zeros
};
std::unique_ptr<Layer> make_batch_norm(std::string name, BatchNormOptions o);

}  // namespace dtrain::layers
