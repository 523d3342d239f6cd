// layers/kinds/relu.hpp — the ReLU layer kind (no options).
//
// x [N, …] → y = max(x, 0), same shape.
#pragma once

#include <memory>
#include <string>

#include "layers/layer.hpp"

namespace dtrain::layers {

std::unique_ptr<Layer> make_relu(std::string name);

}  // namespace dtrain::layers
