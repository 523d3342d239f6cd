// comm/staging.cpp — the device arena's host staging buffers (staging.hpp).
#include "comm/staging.hpp"

#include <algorithm>
#include <cstdlib>

#include "core/error.hpp"

namespace dtrain::comm::detail {

void Staging::HostFree::operator()(float* p) const {
  if (p == nullptr) return;
  if (release) release(p);
  else std::free(p);
}

Staging::Staging(const DeviceArena& d, size_t arena, bool need_grads, bool need_params)
    : device_(true), download_(d.download), upload_(d.upload) {
  DT_CHECK(d.download && d.upload, "a device arena needs the download and upload hooks");
  DT_CHECK(static_cast<bool>(d.host_alloc) == static_cast<bool>(d.host_free),
           "a device arena's host_alloc and host_free come together");
  const size_t bytes = std::max<size_t>(arena, 1) * sizeof(float);
  auto alloc = [&]() {
    void* p = d.host_alloc ? d.host_alloc(bytes) : std::malloc(bytes);
    DT_CHECK(p != nullptr, "cannot allocate ", bytes, " bytes of host staging memory");
    return std::unique_ptr<float, HostFree>(static_cast<float*>(p), HostFree{d.host_free});
  };
  if (need_grads) g_ = alloc();
  if (need_params) p_ = alloc();
}

}  // namespace dtrain::comm::detail
