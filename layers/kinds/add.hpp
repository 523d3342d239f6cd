// layers/kinds/add.hpp — the residual add layer kind (no options).
//
// a, b [N, C, H, W] (one shape) → y = a + b; backward copies dy to both inputs.
#pragma once

#include <memory>
#include <string>

#include "layers/layer.hpp"

namespace dtrain::layers {

std::unique_ptr<Layer> make_add(std::string name);

}  // namespace dtrain::layers
