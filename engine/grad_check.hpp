// engine/grad_check.hpp — the allreduce-mode non-finite check of the summed
// gradient, shared out over the workers (engine/worker_loop.cpp).
#pragma once

#include <cstddef>
#include <functional>

#include "layers/net.hpp"

namespace dtrain {

// What layers::backward_grads_finite answers, for a gradient arena that
// holds the sum over `workers` workers of what each one's backward() wrote
// (allreduce mode: the same sum on each), with a 1/workers share of the
// reading on each worker: worker `worker` (0-based) reads its share of the
// ranges no layer bounds (Net::unbounded_grad_ranges, split by elements), and
// the layers' bounds (Net::grad_bounds) are added over the workers — a sum of
// bounds bounds the sum, and a sum below layers::kGradBoundLimit proves that
// layer's summed gradient finite; a layer whose sum is not below it is read
// whole by every worker. `sum` adds count doubles over the workers in place
// (every worker calls this at the same point, once): one call of 1 + (layers
// that bound) doubles. own_bounds false: this worker's gradient was written
// after its backward (a test's injected Inf), so it gives +Inf for every
// bound. Every worker returns the same answer. Host memory. Throws Error on
// worker ∉ [0, workers).
bool summed_grads_finite(const layers::Net& net, int worker, int workers, bool own_bounds,
                         const std::function<void(double*, size_t)>& sum);

}  // namespace dtrain
