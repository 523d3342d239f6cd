// io/synth.hpp — deterministic synthetic datasets (ImageNet-shaped or any
// shape) in the layout of DESIGN.md §5, for throughput work without the real
// data. Content: label(i) = hash(seed, i) mod classes; each pixel is a
// class-dependent smooth pattern plus hash noise, so the set is learnable and
// the same bytes come out on every machine.
#pragma once

#include <cstdint>
#include <string>

namespace dtrain::io {

// Writes n samples of [h, w, c] uint8 to `path` (temporary name + rename),
// streaming in blocks, chunked along N like every dataset writer (chunk_samples
// 0 = the writer's default; other values for layout benchmarks). Throws
// UsageError on a non-positive size or classes.
void synthesize_dataset(const std::string& path, int64_t n, int64_t h, int64_t w, int64_t c,
                        int classes, uint64_t seed = 1, int64_t chunk_samples = 0);

}  // namespace dtrain::io
