// layers/kinds/lrn.hpp — local response normalisation across channels and its options
// (the formula: LrnDesc in layers/backend.hpp).
//
// x [N, C, H, W] → y [N, C, H, W].
#pragma once

#include <memory>
#include <string>

#include "layers/layer.hpp"

namespace dtrain::layers {

struct LrnOptions {
  int size = 5;
  float alpha = 1e-4f, beta = 0.75f, k = 1.0f;  // Caffe's AlexNet: 5, 1e-4, 0.75, 1
};
std::unique_ptr<Layer> make_lrn(std::string name, LrnOptions o);

}  // namespace dtrain::layers
