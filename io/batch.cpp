// io/batch.cpp — uint8 HWC → normalised float NCHW.
#include "io/batch.hpp"

#include "io/augment.hpp"

namespace dtrain::io {

void normalize_to_nchw(const uint8_t* hwc, int64_t b, int64_t h, int64_t w, int64_t c,
                       const std::vector<float>& mean, const std::vector<float>& std, float* out) {
  // The loader's per-sample decode without crop or flip: one implementation of
  // the arithmetic for training batches and evaluation alike.
  const NormalizeTable norm(c, mean, std);
  const CropFlip none{0, 0, false};
  for (int64_t i = 0; i < b; ++i) decode_sample(hwc + i * h * w * c, h, w, c, norm, 0, none, out + i * c * h * w);
}

}  // namespace dtrain::io
