// layers/layer_kinds.hpp — every layer kind, for model builders: one header
// per kind under layers/kinds/ holds its options and factory (the class is in
// the kind's .cpp). A new kind: kinds/<kind>.hpp + .cpp, a line in
// layers/kinds/kinds.cmake, a line here.
//
// Shapes: activations are [N, C, H, W]; Linear flattens its input to [N, C·H·W].
#pragma once

#include "layers/kinds/add.hpp"
#include "layers/kinds/batch_norm.hpp"
#include "layers/kinds/conv.hpp"
#include "layers/kinds/dropout.hpp"
#include "layers/kinds/flatten.hpp"
#include "layers/kinds/linear.hpp"
#include "layers/kinds/lrn.hpp"
#include "layers/kinds/pool.hpp"
#include "layers/kinds/relu.hpp"
