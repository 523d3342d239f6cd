// layers/kinds/dropout.hpp — inverted dropout; its one option is the drop probability p.
//
// x [N, …] → y, same shape; identity at inference. Throws Error unless p ∈ [0, 1).
#pragma once

#include <memory>
#include <string>

#include "layers/layer.hpp"

namespace dtrain::layers {

std::unique_ptr<Layer> make_dropout(std::string name, float p);

}  // namespace dtrain::layers
