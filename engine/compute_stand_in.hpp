// engine/compute_stand_in.hpp — the compute stand-in (--compute-stand-in-ms X,
// issue 16): a worker spends X ms per step instead of computing forward and
// backward, so an exchange study can run clusters of GPUs this machine does
// not have (docs/performance-model.md, "The compute stand-in").
//
// One step of the stand-in: no forward, no loss, no backward. The gradient
// arena is filled range by range and each range is handed to on_ready (the
// exchange's grads_ready) with the ranges, and in the order, of the real
// backward pass (layers::Net::grad_ready_events), so the exchange moves the
// real model's whole arena in the same buckets and slices and overlaps with
// "backward" as in a real step.
//
// Schedule (from the step's start t0): forward takes X/3 and backward 2X/3
// (backward ≈ 2× forward: every layer computes dx and dW); inside backward a
// range is ready when the layers backward passes up to it are done, each
// taking its share of 2X/3 in proportion to its forward FLOPs. Without FLOPs
// (none counted) the ranges are spread evenly over 2X/3. The step returns at
// t0 + X. Deadlines are absolute, so the fill and the hook's time are absorbed
// and lateness does not accumulate; each one is slept to with
// sleep_until(deadline − kSpinS) on steady_clock and spun for the rest.
//
// Gradient: every element = kGradient / workers, so the workers' sum is
// kGradient on every rank in every mode: finite, deterministic, the same
// update as a 1-rank run of the same stand-in (the integration test compares).
// What it does not emulate: compute contending with the exchange's CPU work
// (a sleeping worker leaves its cores free), device memory traffic (nothing is
// uploaded: not the minibatch, not activations), a loss (recorded as 0, the
// records say "compute_stand_in_ms").
#pragma once

#include <chrono>
#include <vector>

#include "layers/backend.hpp"
#include "layers/net.hpp"

namespace dtrain::engine {

class ComputeStandIn {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr float kGradient = 1.0f / 8192.0f;  // 2^-13: exact halves and quarters
  static constexpr double kSpinS = 200e-6;            // spun before each deadline (timer slack, wake-up)

  // ms > 0: the step time; workers ≥ 1: the workers whose gradients are summed.
  ComputeStandIn(const layers::Net& net, double ms, int workers);

  double ms() const { return ms_; }
  // Seconds from the step's start at which each range is reported ready (increasing, < ms / 1000).
  const std::vector<double>& ready_at() const { return ready_at_; }
  const std::vector<layers::GradReadyEvent>& events() const { return events_; }

  // One step started at t0: fills each range of grads (the backend's memory)
  // with kGradient / workers and reports it to on_ready (may be empty) at its
  // time; returns at t0 + ms.
  void step(Clock::time_point t0, layers::Backend& be, float* grads, const layers::GradReadyFn& on_ready) const;

 private:
  double ms_;
  float value_;
  std::vector<layers::GradReadyEvent> events_;
  std::vector<double> ready_at_;
};

// Returns at t (not before; late by the wake-up's lateness beyond kSpinS).
void sleep_until_precisely(ComputeStandIn::Clock::time_point t);

}  // namespace dtrain::engine
