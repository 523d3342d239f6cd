// io/synth.cpp — synthetic datasets.
#include "io/synth.hpp"

#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "io/hdf5_dataset.hpp"
#include "io/output_lock.hpp"

namespace dtrain::io {

namespace {
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

void synthesize_dataset(const std::string& path, int64_t n, int64_t h, int64_t w, int64_t c,
                        int classes, uint64_t seed, int64_t chunk_samples) {
  if (n <= 0 || h <= 0 || w <= 0 || c <= 0)
    DT_USAGE("dtrain data synth: shape ", h, "x", w, "x", c, " and n ", n, " must be positive");
  if (classes <= 0) DT_USAGE("dtrain data synth: classes must be positive, got ", classes);
  if (chunk_samples < 0) DT_USAGE("dtrain data synth: chunk samples must be >= 0, got ", chunk_samples);
  const OutputLock lock(path, "dtrain data synth");  // and a stopped run's temporaries go (output_lock.hpp)
  remove_stale_temporaries(path, "synth");
  DatasetWriter writer(path, n, h, w, c, classes, 0, chunk_samples);
  const int64_t sample = h * w * c;
  const int64_t block = std::max<int64_t>(1, (int64_t{8} << 20) / sample);  // ~8 MiB per write
  std::vector<uint8_t> images;
  std::vector<int32_t> labels;
  for (int64_t begin = 0; begin < n; begin += block) {
    int64_t count = std::min(block, n - begin);
    images.resize(static_cast<size_t>(count * sample));
    labels.resize(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      const uint64_t id = static_cast<uint64_t>(begin + i);
      const int32_t label = static_cast<int32_t>(mix(seed * 0x9E3779B97F4A7C15ull + id) % static_cast<uint64_t>(classes));
      labels[static_cast<size_t>(i)] = label;
      uint8_t* img = images.data() + i * sample;
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          for (int64_t ch = 0; ch < c; ++ch) {
            // A diagonal stripe whose period and phase encode the class, plus noise.
            int64_t period = 4 + label % 13;
            int64_t v = ((x + y * (1 + label % 3) + ch * label) % period) * 160 / period;
            uint64_t noise = mix(id * 0x100000001B3ull + static_cast<uint64_t>((y * w + x) * c + ch)) % 96;
            img[(y * w + x) * c + ch] = static_cast<uint8_t>(v + static_cast<int64_t>(noise));
          }
    }
    writer.write(begin, count, images, labels);
  }
  writer.commit();
}

}  // namespace dtrain::io
