// io/sampler.hpp — which samples each worker reads, step by step.
//
// Training: one permutation of [0, N) per epoch, a pure function of (seed,
// epoch), identical on every rank. Step s of an epoch takes the global batch
// perm[s·W·B, (s+1)·W·B) and worker r reads its slice perm[s·W·B + r·B, … + B),
// so every worker runs exactly steps_per_epoch() = ⌊N / (W·B)⌋ steps and the
// union over workers is the epoch's first steps·W·B samples of the permutation;
// the remainder N − steps·W·B (fewer than W·B samples, different ones each
// epoch) is skipped. With W = 1 and B' = W·B, the 1-process run sees the same
// global batches — the basis of the distributed-equals-serial tests.
//
// Evaluation: worker r scores the contiguous shard [⌊r·N/W⌋, ⌊(r+1)·N/W⌋) in
// batches of at most B; every test sample is scored exactly once.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace dtrain::io {

class Sampler {
 public:
  // n samples, `workers` workers, this worker's `rank` in [0, workers), B = minibatch.
  // Throws UsageError when n < workers·minibatch (not one step per epoch).
  Sampler(int64_t n, int workers, int rank, int minibatch, uint64_t seed);

  int64_t n() const { return n_; }
  int workers() const { return workers_; }
  int rank() const { return rank_; }
  int minibatch() const { return minibatch_; }
  uint64_t seed() const { return seed_; }
  int64_t steps_per_epoch() const { return steps_; }
  int64_t remainder() const { return n_ - steps_ * workers_ * minibatch_; }
  // This worker's indices for (epoch, step), in permutation order; [B].
  std::vector<int64_t> batch(int64_t epoch, int64_t step);
  // The whole permutation of an epoch (for tests).
  std::vector<int64_t> permutation(int64_t epoch) const;

 private:
  int64_t n_;
  int workers_, rank_, minibatch_;
  uint64_t seed_;
  int64_t steps_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> perm_;
};

// [begin, end) of the evaluation shard of worker `rank` among `workers`.
std::pair<int64_t, int64_t> eval_shard(int64_t n, int workers, int rank);

}  // namespace dtrain::io
