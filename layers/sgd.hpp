// layers/sgd.hpp — SGD with momentum and weight decay over flat arena ranges,
// learning-rate schedules, and the linear scaling rule.
//
// The update is torch.optim.SGD's (dampening 0, no Nesterov):
//   g = grad + wd·param;  v = momentum·v + g;  param −= lr·v
// with wd = 0 on ranges marked no_decay when `decay_bias_bn` is false.
// The rule works on any range [begin, end) of the arena, so a parameter server
// can apply it to the slices it owns (DESIGN.md §3) without knowing layers.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "layers/backend.hpp"
#include "layers/net.hpp"

namespace dtrain::layers {

// Learning rate as a function of the step (Goyal et al. 2017 for warm-up and
// the linear scaling rule; Loshchilov & Hutter 2017 for cosine annealing).
// Warm-up overrides the rule below it for step < warmup_steps; the step rule
// counts from step 0 (not from the end of warm-up), so a decay that falls
// inside the warm-up shows from its end on.
struct LrSchedule {
  enum class Kind { constant, step, cosine };
  Kind kind = Kind::constant;
  float base_lr = 0.01f;
  int64_t warmup_steps = 0;       // linear ramp from warmup_start·base_lr to base_lr
  float warmup_start = 0.1f;
  int64_t step_size = 0;          // step: multiply by gamma every step_size steps
  // step: if not empty, instead of step_size, multiply by gamma once at each of
  // these steps (non-decreasing; at(s) = base_lr·gamma^(number of milestones ≤ s)),
  // as torch.optim.lr_scheduler.MultiStepLR and Caffe's "multistep" policy.
  std::vector<int64_t> milestones;
  float gamma = 0.1f;
  int64_t total_steps = 0;        // cosine: decays to min_lr at total_steps
  float min_lr = 0.0f;

  float at(int64_t step) const;  // step counts from 0
  static Kind parse_kind(const std::string& s);  // "constant" | "step" | "cosine"; UsageError otherwise
};

// Linear scaling rule (Goyal et al. 2017, §2.1): lr = base_lr · global_batch / base_batch.
float linear_scaled_lr(float base_lr, int base_batch, int global_batch);

// Σ x[i]² over n floats of host memory, in double: the gradient norm's square
// for the non-finite check and clipping (non-finite when any x[i] is). 256
// contiguous groups, each in core/sum_squares.hpp's fixed order of 32 lanes,
// added in group order: the same bits for any thread count, and the pass runs
// at memory speed on all the threads (set_cpu_threads).
double sum_of_squares(const float* x, size_t n);
// True when the gradient arena of `net` (host memory) as its last backward()
// wrote it holds no Inf or NaN: sum_of_squares over the ranges that backward
// did not prove finite (Net::unproven_grad_ranges) — an exact answer that
// reads, for AlexNet-OWT, 10 of the arena's 244 MB. Only for an arena nothing
// but backward() wrote since.
bool backward_grads_finite(const Net& net);

struct SgdOptions {
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  bool decay_bias_bn = true;  // false: no weight decay on biases and batch-norm parameters
};

class Sgd {
 public:
  // ranges: the Net's param_ranges() (their no_decay flags); arena_count floats.
  Sgd(Backend& backend, SgdOptions o, std::vector<ParamRange> ranges, size_t arena_count);

  // Applies one update to param[begin, end) (indices into the arena; the
  // pointers point at the whole arena). The momentum state is kept here.
  // params_bf16, when not nullptr: the bf16 weight mirror of the arena
  // (Net::weight_mirror), written for [begin, end) in the same pass.
  void step(float* params, const float* grads, float lr, size_t begin, size_t end,
            uint16_t* params_bf16 = nullptr);
  void step(float* params, const float* grads, float lr) { step(params, grads, lr, 0, count_); }
  // The update of [begin, end) out of place, for a speculating parameter
  // server's two generations (comm::ServeHooks::rule_into): reads params_in
  // and mom_in, writes params_out and mom_out (whole-arena pointers, host
  // memory; momentum_state() may be either momentum arena). Bitwise the
  // values step() leaves in place; this Sgd's own momentum is not read unless
  // it is passed. Throws Error on a range outside the arena.
  void step_into(const float* params_in, const float* mom_in, float* params_out, float* mom_out,
                 const float* grads, float lr, size_t begin, size_t end);
  // The whole arena of `net` from its gradients, with its weight mirror where
  // it keeps one (then Net::weight_mirror_written: the next forward reads it).
  void step(Net& net, float lr);

  float* momentum_state() { return mom_.get(); }  // [arena_count], for checkpoints
  size_t count() const { return count_; }

 private:
  // [begin, end) as segments of equal weight decay (SgdOptions::decay_bias_bn).
  std::vector<Backend::SgdSegment> segments(size_t begin, size_t end) const;

  Backend& backend_;
  SgdOptions o_;
  std::vector<ParamRange> ranges_;
  size_t count_;
  std::shared_ptr<float> mom_;
};

}  // namespace dtrain::layers
