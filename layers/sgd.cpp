// layers/sgd.cpp — SGD and learning-rate schedules.
#include "layers/sgd.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "core/sum_squares.hpp"

namespace dtrain::layers {

float LrSchedule::at(int64_t step) const {
  if (warmup_steps > 0 && step < warmup_steps) {
    double f = warmup_start + (1.0 - warmup_start) * static_cast<double>(step) / static_cast<double>(warmup_steps);
    return static_cast<float>(base_lr * f);
  }
  switch (kind) {
    case Kind::constant:
      return base_lr;
    case Kind::step: {
      if (!milestones.empty()) {
        const auto passed = std::upper_bound(milestones.begin(), milestones.end(), step) - milestones.begin();
        return static_cast<float>(base_lr * std::pow(static_cast<double>(gamma), static_cast<double>(passed)));
      }
      if (step_size <= 0) return base_lr;
      return static_cast<float>(base_lr * std::pow(static_cast<double>(gamma), static_cast<double>(step / step_size)));
    }
    case Kind::cosine: {
      int64_t span = std::max<int64_t>(1, total_steps - warmup_steps);
      double t = std::clamp(static_cast<double>(step - warmup_steps) / static_cast<double>(span), 0.0, 1.0);
      return static_cast<float>(min_lr + 0.5 * (base_lr - min_lr) * (1.0 + std::cos(M_PI * t)));
    }
  }
  return base_lr;
}

LrSchedule::Kind LrSchedule::parse_kind(const std::string& s) {
  if (s == "constant") return Kind::constant;
  if (s == "step") return Kind::step;
  if (s == "cosine") return Kind::cosine;
  DT_USAGE("lr-schedule: unknown schedule '", s, "' (constant, step, cosine)");
}

float linear_scaled_lr(float base_lr, int base_batch, int global_batch) {
  DT_CHECK(base_batch > 0 && global_batch > 0, "batch sizes must be positive");
  return base_lr * static_cast<float>(global_batch) / static_cast<float>(base_batch);
}

double sum_of_squares(const float* x, size_t n) {
  // kGroups contiguous groups (whole rounds of kSumSquaresLanes floats each),
  // summed on all threads, then added in group order: the same bits for any
  // thread count, and no allocation on the training step's path.
  constexpr ptrdiff_t kGroups = 256;
  constexpr size_t kL = kSumSquaresLanes;
  const size_t group = ((n + kGroups - 1) / kGroups + kL - 1) / kL * kL;
  double part[kGroups] = {};
#pragma omp parallel for schedule(static) if (n >= (size_t{1} << 16))
  for (ptrdiff_t g = 0; g < kGroups; ++g) {
    const size_t begin = std::min(n, static_cast<size_t>(g) * group);
    part[g] = sum_squares(x + begin, std::min(n, begin + group) - begin);
  }
  double total = 0;
  for (double v : part) total += v;
  return total;
}

bool backward_grads_finite(const Net& net) {
  for (const auto& [lo, hi] : net.unproven_grad_ranges())
    if (!std::isfinite(sum_of_squares(net.grads().data() + lo, hi - lo))) return false;
  return true;
}

Sgd::Sgd(Backend& backend, SgdOptions o, std::vector<ParamRange> ranges, size_t arena_count)
    : backend_(backend), o_(o), ranges_(std::move(ranges)), count_(arena_count) {
  mom_ = backend_.allocate(std::max<size_t>(count_, 1));
  std::sort(ranges_.begin(), ranges_.end(), [](auto& a, auto& b) { return a.offset < b.offset; });
}

void Sgd::step(Net& net, float lr) {
  DT_CHECK(net.num_params() == count_, "SGD of ", count_, " parameters given a net of ", net.num_params());
  uint16_t* mirror = net.weight_mirror();
  step(net.params().data(), net.grads().data(), lr, 0, count_, mirror);
  if (mirror != nullptr) net.weight_mirror_written();
}

std::vector<Backend::SgdSegment> Sgd::segments(size_t begin, size_t end) const {
  DT_CHECK(begin <= end && end <= count_, "SGD range [", begin, ", ", end, ") outside the arena of ", count_);
  if (o_.decay_bias_bn || o_.weight_decay == 0.0f) return {{begin, end, o_.weight_decay}};  // one decay: one segment
  // The parameter ranges that overlap [begin, end), runs of equal decay
  // merged, as segments of one pass over the arena.
  std::vector<Backend::SgdSegment> segs;
  size_t pos = begin;
  for (const auto& r : ranges_) {
    size_t lo = std::max(pos, r.offset), hi = std::min(end, r.offset + r.count);
    if (lo >= hi) continue;
    const float wd = r.no_decay ? 0.0f : o_.weight_decay;
    if (!segs.empty() && segs.back().end == lo && segs.back().weight_decay == wd)
      segs.back().end = hi;
    else
      segs.push_back({lo, hi, wd});
    pos = hi;
  }
  return segs;
}

void Sgd::step(float* params, const float* grads, float lr, size_t begin, size_t end, uint16_t* params_bf16) {
  const std::vector<Backend::SgdSegment> segs = segments(begin, end);
  backend_.sgd_update_segments(params, grads, mom_.get(), segs.data(), segs.size(), lr, o_.momentum, params_bf16);
}

void Sgd::step_into(const float* params_in, const float* mom_in, float* params_out, float* mom_out,
                    const float* grads, float lr, size_t begin, size_t end) {
  DT_CHECK(mom_in != nullptr && mom_out != nullptr, "SGD out of place without momentum arenas");
  const std::vector<Backend::SgdSegment> segs = segments(begin, end);
  backend_.sgd_update_segments_into(params_in, mom_in, params_out, mom_out, grads, segs.data(), segs.size(), lr,
                                    o_.momentum);
  // Elements of [begin, end) in no parameter range are not updated; out of
  // place they are still the other generation's, so they are copied (the
  // caller's out arena holds every element of [begin, end) when this returns).
  auto copy = [&](size_t lo, size_t hi) {
    if (lo >= hi) return;
    if (params_out != params_in) std::memcpy(params_out + lo, params_in + lo, (hi - lo) * sizeof(float));
    if (mom_out != mom_in) std::memcpy(mom_out + lo, mom_in + lo, (hi - lo) * sizeof(float));
  };
  size_t pos = begin;
  for (const auto& s : segs) {
    copy(pos, s.begin);
    pos = s.end;
  }
  copy(pos, end);
}

}  // namespace dtrain::layers
