// io/batch.cpp — uint8 HWC → normalised float NCHW.
#include "io/batch.hpp"

#include "core/error.hpp"

namespace dtrain::io {

void normalize_to_nchw(const uint8_t* hwc, int64_t b, int64_t h, int64_t w, int64_t c,
                       const std::vector<float>& mean, const std::vector<float>& std, float* out) {
  DT_CHECK(mean.empty() || static_cast<int64_t>(mean.size()) == c, "mean has ", mean.size(),
           " values for ", c, " channels");
  DT_CHECK(std.empty() || static_cast<int64_t>(std.size()) == c, "std has ", std.size(),
           " values for ", c, " channels");
  const int64_t hw = h * w;
  for (int64_t ch = 0; ch < c; ++ch) {
    // out = pixel · scale + shift, with scale = 1/(255·std), shift = −mean/std.
    float s = std.empty() ? 1.0f : std[ch];
    float m = mean.empty() ? 0.0f : mean[ch];
    float scale = 1.0f / (255.0f * s), shift = -m / s;
    for (int64_t i = 0; i < b; ++i) {
      const uint8_t* src = hwc + i * hw * c + ch;
      float* dst = out + (i * c + ch) * hw;
      for (int64_t p = 0; p < hw; ++p) dst[p] = static_cast<float>(src[p * c]) * scale + shift;
    }
  }
}

}  // namespace dtrain::io
