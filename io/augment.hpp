// io/augment.hpp — the loader's augmentation: where each sample's network input
// comes from, and the per-sample uint8 HWC → normalised float CHW decode.
//
// Crops (AugmentOptions::mode):
//   none — the stored image as it is when it has the input's size, fused with
//          the small-image augmentations: random crop with zero padding and
//          horizontal flip (He et al. 2016 §4.2 "4 pixels are padded on each side,
//          and a 32×32 crop is randomly sampled from the padded image or its
//          horizontal flip"); an image of another size gets the evaluation crop;
//   crop — AlexNet (Krizhevsky et al. 2012, "random 224×224 patches … from the
//          256×256 images"; torchvision's Resize(256) + RandomCrop): the image's
//          shorter side resized to R (unless it is R already), then a random
//          input-size crop;
//   rrc  — ResNet (Goyal et al. 2017 / torchvision's RandomResizedCrop, He et al.
//          2016 after Szegedy et al. 2015): a region of area fraction U(0.08, 1)
//          and log-uniform aspect ratio w/h in [3/4, 4/3], up to 10 tries, else
//          torchvision's fallback (the whole image clamped to the ratio range,
//          centred), resized to the input size (rrc_region);
//   evaluation (eval_plan) — torchvision's Resize(R) + CenterCrop(input): the
//          shorter side resized to R, the longer to ⌊R·long/short⌋, the input-size
//          window at ((H'−h)/2, (W'−w)/2) rounded half to even, as Python's round;
//          an image already of the input size is taken whole.
// Flip (any mode): horizontal, probability 1/2, applied to the network input.
// R (resize) = --eval-resize; 0 → round(256/224 · the input's larger side).
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

#include "io/resample.hpp"  // Rect

namespace dtrain::io {

enum class CropMode { none, crop, rrc };
const char* crop_mode_name(CropMode m);  // none | crop | rrc

struct AugmentOptions {
  int pad = 0;        // P ≥ 0: zero-pad P pixels on each side, crop back to H × W (0 = no crop); mode none only
  bool flip = false;  // horizontal flip with probability 1/2
  CropMode mode = CropMode::none;
  double scale_min = 0.08, scale_max = 1.0;             // rrc: area fraction of the region
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;  // rrc: aspect ratio w/h (log-uniform)
  bool enabled() const { return pad > 0 || flip || mode != CropMode::none; }
};

// The default R for an input of h × w: round(256/224 · max(h, w)) (256 for 224).
int64_t default_resize(int64_t h, int64_t w);

// Where one sample's network input comes from: the region `from` of the stored
// image is resized to rh × rw, the window `take` (the input size) of that is
// kept, then mirrored when `flip` (see resample()).
struct SamplePlan {
  Rect from;
  int64_t rh = 0, rw = 0;
  Rect take;
  bool flip = false;
  bool operator==(const SamplePlan&) const = default;
};

// A counter-free stream of random numbers for one sample (SplitMix64).
class SampleRng {
 public:
  explicit SampleRng(uint64_t state) : state_(state) {}
  uint64_t next();
  double uniform();            // [0, 1), 53 bits
  int64_t below(int64_t n);    // [0, n), n ≥ 1
 private:
  uint64_t state_;
};

// torchvision's RandomResizedCrop.get_params on an h × w image: the region
// (file comment), drawn from `rng`.
Rect rrc_region(int64_t h, int64_t w, const AugmentOptions& aug, SampleRng& rng);

// The evaluation plan for an h × w image, input oh × ow, shorter side R ≥
// max(oh, ow) (file comment). Throws Error when R < max(oh, ow).
SamplePlan eval_plan(int64_t h, int64_t w, int64_t oh, int64_t ow, int64_t resize);

// The training plan of sample `index` in `epoch` for an h × w image: a pure
// function of its arguments (mode none: eval_plan, flipped or not).
SamplePlan train_plan(const AugmentOptions& aug, uint64_t seed, int64_t epoch, int64_t index, int64_t h,
                      int64_t w, int64_t oh, int64_t ow, int64_t resize);

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
