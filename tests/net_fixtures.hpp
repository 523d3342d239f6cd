// tests/net_fixtures.hpp — a small DAG with every layer kind, its input and
// the mean softmax cross-entropy, shared by the Net tests.
#pragma once

#include <cstdint>
#include <vector>

#include "gradcheck.hpp"
#include "layers/layer_kinds.hpp"
#include "layers/net.hpp"

namespace dtrain::test {

using namespace dtrain::layers;

// input [N,3,6,6] → conv → bn → relu → conv → (+ conv1 output) → relu → maxpool
// → lrn → global avg pool → dropout → linear(5): every layer kind, a residual fan-out.
// smooth: without ReLU and with average pooling, so that float central
// differences never straddle a kink.
inline Net small_dag(int n, float dropout = 0.0f, bool smooth = false) {
  Net net(Shape(n, 3, 6, 6));
  ConvOptions c;
  c.out_channels = 4;
  c.kernel = 3;
  c.pad = 1;
  int a = net.add(make_conv("conv1", c), Net::kInput);
  int b = net.add(make_batch_norm("bn1", {}), a);
  if (!smooth) b = net.add(make_relu("relu1"), b);
  c.groups = 2;
  b = net.add(make_conv("conv2", c), b);
  int s = net.add(make_add("add"), {b, a});
  if (!smooth) s = net.add(make_relu("relu2"), s);
  s = net.add(make_pool("pool", {smooth ? PoolKind::avg : PoolKind::max, 2, 2, 0}), s);
  s = net.add(make_lrn("lrn", {3, 1e-2f, 0.75f, 1.0f}), s);
  s = net.add(make_global_avg_pool("gap"), s);
  s = net.add(make_dropout("drop", dropout), s);
  LinearOptions l;
  l.out_features = 5;
  net.add(make_linear("fc", l), s);
  return net;
}

inline Tensor input(int n, uint64_t seed) {
  Tensor x(Shape(n, 3, 6, 6));
  auto v = dtrain::test::random_uniform(static_cast<size_t>(x.numel()), seed);
  std::copy(v.begin(), v.end(), x.data());
  return x;
}

// Mean softmax cross-entropy of the net on (x, labels); fills dlogits when asked.
inline double loss_of(Net& net, Backend& be, const Tensor& x, const std::vector<int32_t>& labels, Tensor* dlogits) {
  const Tensor& y = net.forward(x, true);
  int n = static_cast<int>(y.shape().n()), k = static_cast<int>(y.shape().c());
  Tensor probs(y.shape());
  int64_t correct = 0;
  double sum = be.softmax_xent_forward(y.data(), labels.data(), n, k, probs.data(), &correct);
  if (dlogits) be.softmax_xent_backward(probs.data(), labels.data(), n, k, 1.0f / n, dlogits->data());
  return sum / n;
}

}  // namespace dtrain::test
