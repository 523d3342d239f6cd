// layers/cpu/reference.hpp — the plain-loop reference backend.
//
// Straightforward loops over float storage, sums accumulated in double, written for
// readability, not speed: the truth every fast backend (oneDNN, cuDNN) is
// tested against, itself tested by central finite differences.
//
// Errors: kernels check their descriptors and inputs (shapes, groups, labels in
// range, dropout p in [0, 1)) and throw dtrain::Error (core/error.hpp, included
// here for callers that catch it).
#pragma once

#include <memory>

#include "core/error.hpp"
#include "layers/backend.hpp"

namespace dtrain::layers {
std::unique_ptr<Backend> make_reference_backend();
}
