// engine/compute_stand_in.cpp — ComputeStandIn (compute_stand_in.hpp).
#include "engine/compute_stand_in.hpp"

#include <thread>

#include "core/error.hpp"
#include "engine/perfmodel.hpp"

namespace dtrain::engine {

ComputeStandIn::ComputeStandIn(const layers::Net& net, double ms, int workers)
    : ms_(ms), value_(kGradient / static_cast<float>(workers)) {
  DT_CHECK(ms > 0 && workers >= 1, "compute stand-in: ", ms, " ms for ", workers, " worker(s)");
  double tail = 0;
  events_ = net.grad_ready_events(&tail);
  double total = tail;
  for (const auto& e : events_) total += e.flops;
  const double x = ms / 1e3, backward = x * perf::kBackwardShare, forward = x - backward;
  double done = 0;
  for (size_t i = 0; i < events_.size(); ++i) {
    done += events_[i].flops;
    const double share = total > 0 ? done / total : static_cast<double>(i + 1) / static_cast<double>(events_.size());
    ready_at_.push_back(forward + backward * share);
  }
}

void ComputeStandIn::step(Clock::time_point t0, layers::Backend& be, float* grads,
                          const layers::GradReadyFn& on_ready) const {
  auto at = [&](double s) { return t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); };
  for (size_t i = 0; i < events_.size(); ++i) {
    const layers::GradReadyEvent& e = events_[i];
    be.fill(grads + e.begin, e.end - e.begin, value_);
    sleep_until_precisely(at(ready_at_[i]));
    if (on_ready) on_ready(e.begin, e.end);
  }
  be.synchronize();
  sleep_until_precisely(at(ms_ / 1e3));
}

void sleep_until_precisely(ComputeStandIn::Clock::time_point t) {
  using Clock = ComputeStandIn::Clock;
  const auto spin = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(ComputeStandIn::kSpinS));
  if (Clock::now() < t - spin) std::this_thread::sleep_until(t - spin);
  while (Clock::now() < t) {
  }
}

}  // namespace dtrain::engine
