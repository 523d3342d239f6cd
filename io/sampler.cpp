// io/sampler.cpp — epoch permutations and shards.
#include "io/sampler.hpp"

#include <numeric>

#include "core/error.hpp"

namespace dtrain::io {

Sampler::Sampler(int64_t n, int workers, int rank, int minibatch, uint64_t seed)
    : n_(n), workers_(workers), rank_(rank), minibatch_(minibatch), seed_(seed) {
  DT_CHECK(workers > 0 && rank >= 0 && rank < workers && minibatch > 0, "bad sampler layout");
  int64_t global = static_cast<int64_t>(workers) * minibatch;
  steps_ = n / global;
  if (steps_ == 0)
    DT_USAGE("the training set has ", n, " samples, fewer than one global batch of ", workers,
             " workers × minibatch ", minibatch, " = ", global);
}

std::vector<int64_t> Sampler::permutation(int64_t epoch) const {
  std::vector<int64_t> p(static_cast<size_t>(n_));
  std::iota(p.begin(), p.end(), int64_t{0});
  // Fisher–Yates driven by splitmix64 of (seed, epoch): the same on every rank and platform.
  uint64_t s = seed_ * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch) * 0xD1B54A32D192ED03ull + 7;
  auto next = [&s]() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (int64_t i = n_ - 1; i > 0; --i) {
    // Unbiased enough for N ≪ 2^64: multiply-shift range reduction.
    uint64_t j = static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * static_cast<uint64_t>(i + 1)) >> 64);
    std::swap(p[static_cast<size_t>(i)], p[j]);
  }
  return p;
}

std::vector<int64_t> Sampler::batch(int64_t epoch, int64_t step) {
  DT_CHECK(step >= 0 && step < steps_, "step ", step, " outside the epoch's ", steps_, " steps");
  if (epoch != cached_epoch_) {
    perm_ = permutation(epoch);
    cached_epoch_ = epoch;
  }
  int64_t begin = (step * workers_ + rank_) * minibatch_;
  return {perm_.begin() + begin, perm_.begin() + begin + minibatch_};
}

std::pair<int64_t, int64_t> eval_shard(int64_t n, int workers, int rank) {
  return {n * rank / workers, n * (rank + 1) / workers};
}

}  // namespace dtrain::io
