// io/batch.hpp — decode a minibatch of uint8 images into the network's input.
#pragma once

#include <cstdint>
#include <vector>

namespace dtrain::io {

// hwc: [B, H, W, C] uint8 → out: [B, C, H, W] float, out = (pixel/255 − mean[c]) / std[c].
// mean / std: empty (0 / 1) or one value per channel. Throws Error on a size mismatch.
void normalize_to_nchw(const uint8_t* hwc, int64_t b, int64_t h, int64_t w, int64_t c,
                       const std::vector<float>& mean, const std::vector<float>& std, float* out);

}  // namespace dtrain::io
