// engine/evaluator.cpp — Evaluator (evaluator.hpp).
#include "engine/evaluator.hpp"

#include <algorithm>
#include <tuple>
#include <vector>

#include "engine/compute.hpp"
#include "io/batch.hpp"
#include "io/sampler.hpp"

namespace dtrain::engine {

Evaluator::Evaluator(const io::Hdf5Dataset& test, const TrainConfig& cfg, int worker, int workers,
                     comm::Exchange* ex)
    : test_(test), cfg_(cfg), ex_(ex) {
  n_ = test.n();
  if (cfg.max_test_samples > 0) n_ = std::min(n_, cfg.max_test_samples);
  std::tie(begin_, end_) = io::eval_shard(n_, workers, worker);
  batch_ = cfg.eval_minibatch > 0 ? cfg.eval_minibatch : cfg.minibatch;
}

Evaluation Evaluator::evaluate(layers::Net& net, layers::Backend& backend) const {
  const int eb = batch_;
  const layers::Shape in = net.input_shape();
  const int k = static_cast<int>(net.output_shape().c());
  // Batch buffers live for one evaluation only (not held through training).
  std::vector<uint8_t> raw(static_cast<size_t>(eb * test_.sample_bytes()));
  layers::Tensor x(layers::Shape(eb, in.c(), in.h(), in.w()));
  StepBuffers dev(backend, eb, in, k);
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t i = begin_; i < end_; i += eb) {
    int64_t b = std::min<int64_t>(eb, end_ - i);
    test_.read_range(i, b, raw.data());
    io::normalize_to_nchw(raw.data(), b, in.h(), in.w(), in.c(), cfg_.mean, cfg_.std, x.data());
    const layers::Tensor& logits = net.forward(dev.x(x.data(), b), /*train=*/false);
    int64_t c = 0;
    loss_sum += backend.softmax_xent_forward(logits.data(), dev.labels(test_.labels().data() + i, b),
                                             static_cast<int>(b), k, dev.probs(), &c);
    correct += c;
  }
  double sums[2] = {loss_sum, static_cast<double>(correct)};
  if (ex_) ex_->sum_over_workers(sums, 2);
  Evaluation e;
  e.loss = n_ > 0 ? sums[0] / static_cast<double>(n_) : 0.0;
  e.accuracy = n_ > 0 ? sums[1] / static_cast<double>(n_) : 0.0;
  return e;
}

}  // namespace dtrain::engine
