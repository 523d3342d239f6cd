// layers/kinds/conv.hpp — the convolution layer kind and its options.
//
// x [N, C, H, W] → y [N, out_channels, OH, OW], OH = (H + 2·pad − kernel) / stride + 1
// (floor); weight [out_channels, C/groups, kernel, kernel], bias [out_channels].
#pragma once

#include <memory>
#include <string>

#include "layers/layer.hpp"

namespace dtrain::layers {

struct ConvOptions {
  int out_channels = 1;
  int kernel = 3;
  int stride = 1;
  int pad = 0;
  int groups = 1;
  bool bias = true;
  Init weight_init = Init::uniform_fan_in;
  Init bias_init = Init::uniform_fan_in;
};
std::unique_ptr<Layer> make_conv(std::string name, ConvOptions o);

}  // namespace dtrain::layers
