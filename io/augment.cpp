// io/augment.cpp — fused decode, normalise, crop and flip of one sample.
#include "io/augment.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace dtrain::io {

namespace {
uint64_t splitmix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

CropFlip crop_flip_for(const AugmentOptions& aug, uint64_t seed, int64_t epoch, int64_t index) {
  CropFlip cf{aug.pad, aug.pad, false};
  if (!aug.enabled()) return cf;
  uint64_t r = splitmix(splitmix(splitmix(seed ^ 0xA076'1D64'78BD'642Full) ^ uint64_t(epoch)) ^
                        uint64_t(index));
  const uint64_t span = uint64_t(2 * aug.pad + 1);
  if (aug.pad > 0) {
    cf.dy = int((r & 0xFFFF) % span);
    cf.dx = int(((r >> 16) & 0xFFFF) % span);
  }
  if (aug.flip) cf.flip = ((r >> 40) & 1) != 0;
  return cf;
}

NormalizeTable::NormalizeTable(int64_t channels, const std::vector<float>& mean,
                               const std::vector<float>& std)
    : lut_(size_t(channels) * 256) {
  DT_CHECK(mean.empty() || int64_t(mean.size()) == channels, "mean has ", mean.size(),
           " values for ", channels, " channels");
  DT_CHECK(std.empty() || int64_t(std.size()) == channels, "std has ", std.size(), " values for ",
           channels, " channels");
  for (int64_t c = 0; c < channels; ++c) {
    float s = std.empty() ? 1.0f : std[size_t(c)];
    float m = mean.empty() ? 0.0f : mean[size_t(c)];
    DT_CHECK(s != 0.0f, "std of channel ", c, " is 0");
    float scale = 1.0f / (255.0f * s), shift = -m / s;
    for (int p = 0; p < 256; ++p) lut_[size_t(c * 256 + p)] = float(p) * scale + shift;
  }
}

void decode_sample(const uint8_t* hwc, int64_t h, int64_t w, int64_t c, const NormalizeTable& norm,
                   int pad, const CropFlip& cf, float* out) {
  const int64_t oy = cf.dy - pad, ox = cf.dx - pad;  // input = output + offset
  for (int64_t ch = 0; ch < c; ++ch) {
    const float* lut = norm.channel(ch);
    const float padv = norm.pad_value(ch);
    float* dst = out + ch * h * w;
    for (int64_t y = 0; y < h; ++y) {
      float* row = dst + y * w;
      const int64_t sy = y + oy;
      if (sy < 0 || sy >= h) {
        std::fill(row, row + w, padv);
        continue;
      }
      const uint8_t* src = hwc + sy * w * c + ch;
      if (!cf.flip && ox == 0) {  // the common, unaugmented case
        for (int64_t x = 0; x < w; ++x) row[x] = lut[src[x * c]];
        continue;
      }
      for (int64_t x = 0; x < w; ++x) {
        const int64_t sx = (cf.flip ? w - 1 - x : x) + ox;
        row[x] = (sx < 0 || sx >= w) ? padv : lut[src[sx * c]];
      }
    }
  }
}

}  // namespace dtrain::io
