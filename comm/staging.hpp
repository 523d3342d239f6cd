// comm/staging.hpp — where the exchange's MPI traffic meets the arena
// (internal to comm/).
//
// The exchange's steps (allreduce in exchange.cpp, ps/hybrid in ps_client.cpp)
// never touch the arena pointers for MPI themselves: they ask the staging for a
// host copy of a gradient range and for a host place to receive parameters,
// and hand both back when done. One step implementation thus serves both
// arenas:
//
//   host arena (identity staging)  grads(g, b, n) = g + b, params(p, b) = p + b,
//                                  put_* do nothing: MPI works on the arena
//                                  itself, no copy, no buffer.
//   device arena (DeviceArena)     grads downloads g[b, b+n) into an
//                                  arena-sized host buffer (host_alloc:
//                                  pinned on CUDA) and returns it; params
//                                  returns the matching place in a second host
//                                  buffer; put_grads / put_params upload them.
//
// The hooks run on the communication thread and return when the copy is done.
// A copy moves bits unchanged, so which staging a run uses never changes a
// result (the device test and it_device_staged check this bitwise).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "comm/exchange.hpp"

namespace dtrain::comm::detail {

class Staging {
 public:
  Staging() = default;  // a host arena: identity
  // A device arena: a gradient and/or a parameter buffer of `arena` floats,
  // only those this rank needs. Throws Error without the hooks or memory.
  Staging(const DeviceArena& d, size_t arena, bool need_grads, bool need_params);

  bool identity() const { return !device_; }

  // A host copy of g[b, b+n) that MPI may read and write.
  float* grads(float* g, size_t b, size_t n) {
    if (!device_) return g + b;
    float* h = g_.get() + b;
    if (n > 0) download_(g + b, h, n);
    return h;
  }
  // g[b, b+n) ← the copy grads(g, b, n) returned (after an in-place reduction).
  void put_grads(float* g, size_t b, size_t n) {
    if (device_ && n > 0) upload_(g_.get() + b, g + b, n);
  }
  // Where p[b, …) is received on the host.
  float* params(float* p, size_t b) { return device_ ? p_.get() + b : p + b; }
  // p[b, b+n) ← what was received at params(p, b).
  void put_params(float* p, size_t b, size_t n) {
    if (device_ && n > 0) upload_(p_.get() + b, p + b, n);
  }

 private:
  struct HostFree {
    std::function<void(void*)> release;
    void operator()(float* p) const;
  };
  bool device_ = false;
  std::function<void(const float*, float*, size_t)> download_;
  std::function<void(const float*, float*, size_t)> upload_;
  std::unique_ptr<float, HostFree> g_, p_;
};

}  // namespace dtrain::comm::detail
