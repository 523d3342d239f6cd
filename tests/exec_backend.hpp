// tests/exec_backend.hpp — a test backend that runs another backend's kernels
// with a given KernelExec (layers/backend.hpp: their own chosen formats, bf16)
// behind the plain float32 interface: each kernel's inputs are converted from
// f32 NCHW into the formats the kernel reports and its outputs back (with the
// inner backend's convert()). So the one table of backend ops
// (backend_ops.hpp) checks every kernel in its blocked and bf16 forms against
// the reference. Elementwise functions, softmax, SGD and the memory model
// (upload, download, synchronize: a device backend works behind it) are the
// inner backend's, untouched; capabilities are none (a Net on it plans plain f32).
#pragma once

#include <memory>

#include "layers/backend.hpp"

namespace dtrain::test {

// exec.src: the format the wrapper hands x in (then converted by the kernel's
// choice, as a Net would); exec.relu must be false.
std::unique_ptr<layers::Backend> make_exec_backend(std::unique_ptr<layers::Backend> inner, layers::KernelExec exec);

}  // namespace dtrain::test
