// layers/kinds/flatten.hpp — the flatten layer kind (no options).
//
// x [N, C, H, W] → y [N, C·H·W] (a copy).
#pragma once

#include <memory>
#include <string>

#include "layers/layer.hpp"

namespace dtrain::layers {

std::unique_ptr<Layer> make_flatten(std::string name);

}  // namespace dtrain::layers
