// io/augment.hpp — per-sample decode for the loader: uint8 HWC → normalised float
// CHW, fused with the two standard augmentations of image classification
// training (random crop with zero padding, horizontal flip; Krizhevsky et al.
// 2012, He et al. 2016 §4.2 "4 pixels are padded on each side, and a 32×32 crop is
// randomly sampled from the padded image or its horizontal flip").
//
// Randomness is a pure function of (seed, epoch, sample index) — never of the
// thread, the batch position or the timing — so a batch is bitwise identical
// whatever the number of loader threads (io/prefetcher).
//
// Normalisation: out = (pixel/255 − mean[c]) / std[c] (io::normalize_to_nchw is this
// decode without crop/flip): scale = 1/(255·std), shift = −mean/std, out = p·scale + shift,
// precomputed as a 256-entry table per channel. Padding pixels are raw 0 (black)
// before normalisation, as torchvision's RandomCrop(padding=P) followed by Normalize.
#pragma once

#include <cstdint>
#include <vector>

namespace dtrain::io {

struct AugmentOptions {
  int pad = 0;        // P ≥ 0: zero-pad P pixels on each side, crop back to H × W (0 = no crop)
  bool flip = false;  // horizontal flip with probability 1/2
  bool enabled() const { return pad > 0 || flip; }
};

// The random choices for one sample: output pixel (y, x) reads input pixel
// (y + dy − P, x' + dx − P) with x' = W−1−x when flipped, else x; dy, dx ∈ [0, 2P].
struct CropFlip {
  int dy = 0, dx = 0;
  bool flip = false;
  bool operator==(const CropFlip&) const = default;
};

// The choices for dataset sample `index` in `epoch` (splitmix64 of the three);
// identity (P, P, no flip) when `aug` is disabled.
CropFlip crop_flip_for(const AugmentOptions& aug, uint64_t seed, int64_t epoch, int64_t index);

// Per-channel lookup table pixel → normalised float. mean / std: empty (0 / 1) or
// one value per channel. Throws Error on a size mismatch or a std of 0.
class NormalizeTable {
 public:
  NormalizeTable(int64_t channels, const std::vector<float>& mean, const std::vector<float>& std);
  const float* channel(int64_t c) const { return lut_.data() + c * 256; }  // [256]
  float pad_value(int64_t c) const { return channel(c)[0]; }             // raw 0, normalised

 private:
  std::vector<float> lut_;  // [C, 256]
};

// hwc: [H, W, C] uint8 → out: [C, H, W] float, cropped/flipped by `cf` with padding `pad`.
void decode_sample(const uint8_t* hwc, int64_t h, int64_t w, int64_t c, const NormalizeTable& norm,
                   int pad, const CropFlip& cf, float* out);

}  // namespace dtrain::io
