// layers/cpu/reference.hpp — the plain-loop reference backend.
//
// Straightforward loops over float storage, sums accumulated in double, written for
// readability, not speed: the truth every fast backend (oneDNN, cuDNN) is
// tested against, itself tested by central finite differences.
#pragma once

#include <memory>

#include "layers/backend.hpp"

namespace dtrain::layers {
std::unique_ptr<Backend> make_reference_backend();
}
