// layers/cpu/reference_kernels.hpp — factories of the reference backend's
// stateful kernels, one per source file (internal to layers/cpu/reference*).
//
//   reference_conv.cpp  convolution (groups, stride, padding) and linear
//   reference_pool.cpp  max / average pooling
//   reference_norm.cpp  LRN across channels and batch normalisation
//   reference.cpp       the Backend itself: storage, elementwise ops, softmax
//                       cross-entropy, SGD, and the factory
//
// Every kernel validates its descriptor at construction (DT_CHECK → dtrain::Error)
// and accumulates sums in double; results are stored as float.
#pragma once

#include <memory>

#include "layers/backend.hpp"

namespace dtrain::layers::reference {

std::unique_ptr<ConvKernel> make_conv(const ConvDesc& d);
std::unique_ptr<LinearKernel> make_linear(const LinearDesc& d);
std::unique_ptr<PoolKernel> make_pool(const PoolDesc& d);
std::unique_ptr<LrnKernel> make_lrn(const LrnDesc& d);
std::unique_ptr<BatchNormKernel> make_batch_norm(const BatchNormDesc& d);

}  // namespace dtrain::layers::reference
