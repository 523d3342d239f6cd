// engine/evaluator.cpp — Evaluator (evaluator.hpp).
#include "engine/evaluator.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "engine/compute.hpp"
#include "engine/train_job.hpp"  // input_transform
#include "io/sample_decoder.hpp"
#include "io/sampler.hpp"

namespace dtrain::engine {

int64_t count_top_k(const float* scores, const int32_t* labels, int64_t n, int classes, int k) {
  DT_CHECK(n >= 0 && classes > 0 && k > 0, "count_top_k: bad shape n=", n, " classes=", classes, " k=", k);
  int64_t hits = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* s = scores + i * classes;
    const int32_t y = labels[i];
    DT_CHECK(y >= 0 && y < classes, "count_top_k: label ", y, " of sample ", i, " is outside [0, ", classes, ")");
    const float sy = s[y];
    if (std::isnan(sy)) continue;
    int above = 0;
    for (int j = 0; j < classes && above < k; ++j)
      above += (s[j] > sy || (s[j] == sy && j < y)) ? 1 : 0;
    hits += above < k ? 1 : 0;
  }
  return hits;
}

Evaluator::Evaluator(const io::Dataset& test, const TrainConfig& cfg, int worker, int workers,
                     comm::Exchange* ex, int threads)
    : test_(test), cfg_(cfg), ex_(ex), threads_(std::max(1, threads)) {
  n_ = test.n();
  if (cfg.max_test_samples > 0) n_ = std::min(n_, cfg.max_test_samples);
  std::tie(begin_, end_) = io::eval_shard(n_, workers, worker);
  batch_ = cfg.eval_minibatch > 0 ? cfg.eval_minibatch : cfg.minibatch;
}

Evaluation Evaluator::evaluate(layers::Net& net, layers::Backend& backend) const {
  const int eb = batch_;
  const layers::Shape in = net.input_shape();
  const int k = static_cast<int>(net.output_shape().c());
  const io::InputTransform t = input_transform(cfg_, in, /*train=*/false);
  const io::NormalizeTable norm(in.c(), cfg_.mean, cfg_.std);
  // Batch buffers live for one evaluation only (not held through training).
  std::vector<int64_t> indices;
  layers::Tensor x(layers::Shape(eb, in.c(), in.h(), in.w()));
  StepBuffers dev(backend, eb, in, k);
  const bool top5 = k >= kTop5MinClasses;
  std::vector<float> host_logits(backend.discrete_memory() && top5 ? static_cast<size_t>(eb) * k : 0);
  double loss_sum = 0;
  int64_t correct = 0, correct5 = 0;
  for (int64_t i = begin_; i < end_; i += eb) {
    int64_t b = std::min<int64_t>(eb, end_ - i);
    indices.resize(static_cast<size_t>(b));
    for (int64_t j = 0; j < b; ++j) indices[static_cast<size_t>(j)] = i + j;
    io::load_batch(test_, indices, t, norm, 0, 0, threads_, x.data());
    const layers::Tensor& logits = net.forward(dev.x(x.data(), b), /*train=*/false);
    int64_t c = 0;
    loss_sum += backend.softmax_xent_forward(logits.data(), dev.labels(test_.labels().data() + i, b),
                                             static_cast<int>(b), k, dev.probs(), &c);
    correct += c;
    if (top5) {  // on the host: a device's logits are downloaded (k floats per image)
      const float* z = logits.data();
      if (backend.discrete_memory()) {
        backend.download(z, host_logits.data(), static_cast<size_t>(b) * k * sizeof(float));
        z = host_logits.data();
      }
      correct5 += count_top_k(z, test_.labels().data() + i, b, k, 5);
    }
  }
  // Counts as doubles: exact up to 2^53 samples.
  double sums[3] = {loss_sum, static_cast<double>(correct), static_cast<double>(correct5)};
  if (ex_) ex_->sum_over_workers(sums, 3);
  Evaluation e;
  e.loss = n_ > 0 ? sums[0] / static_cast<double>(n_) : 0.0;
  e.accuracy = n_ > 0 ? sums[1] / static_cast<double>(n_) : 0.0;
  if (top5) e.top5_accuracy = n_ > 0 ? sums[2] / static_cast<double>(n_) : 0.0;
  return e;
}

}  // namespace dtrain::engine
