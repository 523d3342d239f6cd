// layers/cpu/staged.hpp — "cpu-staged": a CPU backend that behaves like a
// discrete device, so the trainer's and the exchange's device paths (arenas on
// the device, batches uploaded, gradients staged to host buffers, parameters
// uploaded back) run and are tested on machines without a GPU.
//
// It wraps another backend (the kernels, "cpu" or "reference": results are
// bitwise those of the wrapped backend) and adds the cuda backend's memory
// model, checked:
//   - discrete_memory() is true; allocate() returns "device" memory, recorded
//     in a registry of live allocations;
//   - every pointer handed to a kernel, copy, fill, softmax or SGD call must lie
//     inside a live device allocation, and upload()/download() need their
//     device side inside one allocation and their host side outside all of
//     them — otherwise dtrain::Error naming the call (what would be an illegal
//     address on a GPU is an error here, not a silent host access);
//   - host_alloc() memory starts as quiet NaN bytes (0x7fc00000 per float; as
//     int32 labels that is out of range), so a host buffer read before the
//     download that should have filled it poisons the result instead of
//     passing.
// Thread safety as the cuda backend's: upload/download/host_alloc from any
// thread, kernels from one.
#pragma once

#include <cstddef>
#include <memory>

#include "layers/backend.hpp"

namespace dtrain::layers {

std::unique_ptr<Backend> make_staged_backend(std::unique_ptr<Backend> kernels);

// The number of bytes of "device" memory the staged backend `b` has live (for
// tests; throws Error when `b` is not a staged backend).
size_t staged_device_bytes(const Backend& b);
// Transfers done so far by a staged backend: uploads and downloads (tests).
struct StagedCounts {
  size_t uploads = 0, downloads = 0, upload_bytes = 0, download_bytes = 0;
};
StagedCounts staged_counts(const Backend& b);

}  // namespace dtrain::layers
