// core/hash.hpp — FNV-1a, 64 bit (Fowler, Noll, Vo): the one hash dtrain uses
// to compare things across ranks and runs (a job's options, an arena's layout,
// the workers' parameters). Not cryptographic; collisions are only a risk for
// adversarial input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dtrain {

inline constexpr uint64_t kFnvOffset = 1469598103934665603ull;

// Continues hash `h` over n bytes at p.
inline uint64_t fnv1a(const void* p, size_t n, uint64_t h = kFnvOffset) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}
inline uint64_t fnv1a(std::string_view s, uint64_t h = kFnvOffset) { return fnv1a(s.data(), s.size(), h); }

}  // namespace dtrain
