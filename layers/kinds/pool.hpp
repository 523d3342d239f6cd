// layers/kinds/pool.hpp — the pooling layer kinds (max, average, global average) and their options.
//
// x [N, C, H, W] → y [N, C, OH, OW], OH = (H + 2·pad − kernel) / stride + 1 (floor);
// global average pooling: y [N, C, 1, 1].
#pragma once

#include <memory>
#include <string>

#include "layers/layer.hpp"

namespace dtrain::layers {

struct PoolOptions {
  PoolKind kind = PoolKind::max;
  int kernel = 2;
  int stride = 2;
  int pad = 0;
};
std::unique_ptr<Layer> make_pool(std::string name, PoolOptions o);
std::unique_ptr<Layer> make_global_avg_pool(std::string name);  // [N,C,H,W] → [N,C,1,1]

}  // namespace dtrain::layers
