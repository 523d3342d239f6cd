// engine/evaluator.hpp — the evaluator: scores the model on the test set
// after every epoch.
//
// Each worker scores its contiguous shard of the first max-test-samples test
// samples (io::eval_shard) in batches of eval-minibatch (else minibatch), in
// inference mode; the loss and correct-count sums are reduced over the
// workers, so the result is identical for any number of ranks. Its state is
// its shard and batch size: it keeps no running statistics (a checkpoint
// saves nothing of it; the net's batch-norm buffers belong to the TrainJob).
#pragma once

#include <cstdint>

#include "comm/exchange.hpp"
#include "engine/config.hpp"
#include "io/hdf5_dataset.hpp"
#include "layers/backend.hpp"
#include "layers/net.hpp"

namespace dtrain::engine {

struct Evaluation {
  double loss = 0;      // mean softmax cross-entropy over the scored samples
  double accuracy = 0;  // in [0, 1]
};

class Evaluator {
 public:
  // worker ∈ [0, workers): this worker's shard; ex: null in a 1-rank job.
  Evaluator(const io::Hdf5Dataset& test, const TrainConfig& cfg, int worker, int workers, comm::Exchange* ex);

  // Collective over the workers (when ex). Uses `net` in inference mode on `backend`.
  Evaluation evaluate(layers::Net& net, layers::Backend& backend) const;

  int64_t samples() const { return n_; }  // scored by all workers together

 private:
  const io::Hdf5Dataset& test_;
  const TrainConfig& cfg_;  // mean, std (normalisation)
  comm::Exchange* ex_;
  int64_t n_ = 0;           // test samples scored (max-test-samples applied)
  int64_t begin_ = 0, end_ = 0;  // this worker's shard [begin, end)
  int batch_ = 0;           // images per evaluation batch
};

}  // namespace dtrain::engine
