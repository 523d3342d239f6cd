// layers/layer_kinds.hpp — the layer kinds, each with its options next to it.
//
// Shapes: activations are [N, C, H, W]; Linear flattens its input to [N, C·H·W].
#pragma once

#include <memory>

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

struct PoolOptions {
  PoolKind kind = PoolKind::max;
  int kernel = 2;
  int stride = 2;
  int pad = 0;
};
std::unique_ptr<Layer> make_pool(std::string name, PoolOptions o);
std::unique_ptr<Layer> make_global_avg_pool(std::string name);  // [N,C,H,W] → [N,C,1,1]

struct LrnOptions {
  int size = 5;
  float alpha = 1e-4f, beta = 0.75f, k = 1.0f;  // Caffe's AlexNet: 5, 1e-4, 0.75, 1
};
std::unique_ptr<Layer> make_lrn(std::string name, LrnOptions o);

struct BatchNormOptions {
  float eps = 1e-5f;
  float momentum = 0.1f;
  Init gamma_init = Init::ones;  // ResNet's zero-init of the last BN of a block: Init::zeros
};
std::unique_ptr<Layer> make_batch_norm(std::string name, BatchNormOptions o);

std::unique_ptr<Layer> make_relu(std::string name);
std::unique_ptr<Layer> make_dropout(std::string name, float p);

struct LinearOptions {
  int out_features = 1;
  bool bias = true;
  Init weight_init = Init::uniform_fan_in;
  Init bias_init = Init::uniform_fan_in;
};
std::unique_ptr<Layer> make_linear(std::string name, LinearOptions o);

std::unique_ptr<Layer> make_flatten(std::string name);  // [N,C,H,W] → [N, C·H·W]
std::unique_ptr<Layer> make_add(std::string name);      // two inputs of one shape: y = a + b

}  // namespace dtrain::layers
