// layers/kinds/linear.hpp — the fully connected layer kind and its options.
//
// x [N, C, H, W] (flattened to [N, C·H·W]) → y [N, out_features];
// weight [out_features, C·H·W] (torch layout), bias [out_features].
#pragma once

#include <memory>
#include <string>

#include "layers/layer.hpp"

namespace dtrain::layers {

struct LinearOptions {
  int out_features = 1;
  bool bias = true;
  Init weight_init = Init::uniform_fan_in;
  Init bias_init = Init::uniform_fan_in;
};
std::unique_ptr<Layer> make_linear(std::string name, LinearOptions o);

}  // namespace dtrain::layers
