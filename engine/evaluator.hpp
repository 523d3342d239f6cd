// engine/evaluator.hpp — the evaluator: scores the model on the test set
// after every epoch.
//
// Each worker scores its contiguous shard of the first max-test-samples test
// samples (io::eval_shard) in batches of eval-minibatch (else minibatch), in
// inference mode; each batch is read and decoded by `threads` threads with the
// evaluation transform (io::load_batch: the image as stored when it has the
// net's input size, else shorter side resized to eval-resize and the center
// crop — raw and jpeg files alike); the loss and correct-count sums (top-1, and
// top-5 with at least kTop5MinClasses classes) are reduced over the workers, so
// the result is identical for any number of ranks. Its state is
// its shard and batch size: it keeps no running statistics (a checkpoint
// saves nothing of it; the net's batch-norm buffers belong to the TrainJob).
#pragma once

#include <cstdint>

#include "comm/exchange.hpp"
#include "engine/config.hpp"
#include "io/dataset.hpp"
#include "layers/backend.hpp"
#include "layers/net.hpp"

namespace dtrain::engine {

// Top-5 accuracy is scored (and reported) only with at least this many classes.
inline constexpr int kTop5MinClasses = 10;

struct Evaluation {
  double loss = 0;            // mean softmax cross-entropy over the scored samples
  double accuracy = 0;        // top-1, in [0, 1]
  double top5_accuracy = -1;  // in [0, 1]; −1: fewer than kTop5MinClasses classes (not scored)
};

// The number of the n samples whose label is among the top k of its K scores.
// scores: [n, K] host floats (logits or probabilities), labels: [n] in [0, K).
// Ties: class j ranks above the label y when s[j] > s[y], or s[j] == s[y] and
// j < y (the lower index wins, as the backends' argmax does: for finite scores
// k = 1 counts exactly what softmax_xent_forward's `correct` counts); the
// label is in the top k when fewer than k classes rank above it. A NaN label
// score never counts; a NaN elsewhere ranks above nothing. k ≥ K counts every
// sample with a non-NaN label score.
int64_t count_top_k(const float* scores, const int32_t* labels, int64_t n, int classes, int k);

class Evaluator {
 public:
  // worker ∈ [0, workers): this worker's shard; ex: null in a 1-rank job;
  // threads: decode threads per batch.
  Evaluator(const io::Dataset& test, const TrainConfig& cfg, int worker, int workers, comm::Exchange* ex,
            int threads = 1);

  // Collective over the workers (when ex). Uses `net` in inference mode on `backend`.
  Evaluation evaluate(layers::Net& net, layers::Backend& backend) const;

  int64_t samples() const { return n_; }  // scored by all workers together

 private:
  const io::Dataset& test_;
  const TrainConfig& cfg_;  // mean, std (normalisation)
  comm::Exchange* ex_;
  int64_t n_ = 0;           // test samples scored (max-test-samples applied)
  int64_t begin_ = 0, end_ = 0;  // this worker's shard [begin, end)
  int batch_ = 0;           // images per evaluation batch
  int threads_ = 1;         // decode threads per batch
};

}  // namespace dtrain::engine
