// io/augment.cpp — fused decode, normalise, crop and flip of one sample.
#include "io/augment.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace dtrain::io {

namespace {
uint64_t splitmix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The per-sample hash every random choice derives from.
uint64_t sample_hash(uint64_t seed, int64_t epoch, int64_t index) {
  return splitmix(splitmix(splitmix(seed ^ 0xA076'1D64'78BD'642Full) ^ uint64_t(epoch)) ^ uint64_t(index));
}

// Python's round() of x/2 for an integer x ≥ 0: half to even.
int64_t half_round_even(int64_t x) {
  const int64_t k = x / 2;
  return x % 2 == 0 ? k : (k % 2 == 0 ? k : k + 1);
}

// torchvision's Resize(R) of an h × w image: shorter side R, longer ⌊R·long/short⌋.
void resized_dims(int64_t h, int64_t w, int64_t r, int64_t* rh, int64_t* rw) {
  if (std::min(h, w) == r) {
    *rh = h;
    *rw = w;
  } else if (h <= w) {
    *rh = r;
    *rw = r * w / h;
  } else {
    *rh = r * h / w;
    *rw = r;
  }
}
}  // namespace

const char* crop_mode_name(CropMode m) {
  switch (m) {
    case CropMode::none: return "none";
    case CropMode::crop: return "crop";
    case CropMode::rrc: return "rrc";
  }
  return "?";
}

int64_t default_resize(int64_t h, int64_t w) {
  return int64_t(std::llround(double(std::max(h, w)) * 256.0 / 224.0));
}

uint64_t SampleRng::next() {
  state_ += 0x9E3779B97F4A7C15ull;
  uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double SampleRng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

int64_t SampleRng::below(int64_t n) {
  DT_CHECK(n >= 1, "SampleRng::below(", n, ")");
  return std::min(n - 1, int64_t(uniform() * double(n)));
}

Rect rrc_region(int64_t h, int64_t w, const AugmentOptions& aug, SampleRng& rng) {
  const double area = double(h) * double(w);
  const double lr0 = std::log(aug.ratio_min), lr1 = std::log(aug.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (aug.scale_min + (aug.scale_max - aug.scale_min) * rng.uniform());
    const double ratio = std::exp(lr0 + (lr1 - lr0) * rng.uniform());
    const int64_t cw = int64_t(std::nearbyint(std::sqrt(target * ratio)));
    const int64_t ch = int64_t(std::nearbyint(std::sqrt(target / ratio)));
    if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
      const int64_t y = rng.below(h - ch + 1);
      const int64_t x = rng.below(w - cw + 1);
      return Rect{y, x, ch, cw};
    }
  }
  // torchvision's fallback: the whole image, clamped to the ratio range, centred.
  const double in_ratio = double(w) / double(h);
  int64_t cw = w, ch = h;
  if (in_ratio < aug.ratio_min)
    ch = int64_t(std::nearbyint(double(cw) / aug.ratio_min));
  else if (in_ratio > aug.ratio_max)
    cw = int64_t(std::nearbyint(double(ch) * aug.ratio_max));
  ch = std::clamp<int64_t>(ch, 1, h);
  cw = std::clamp<int64_t>(cw, 1, w);
  return Rect{(h - ch) / 2, (w - cw) / 2, ch, cw};
}

SamplePlan eval_plan(int64_t h, int64_t w, int64_t oh, int64_t ow, int64_t resize) {
  SamplePlan p;
  p.from = Rect{0, 0, h, w};
  if (h == oh && w == ow) {  // already the input's size: taken whole
    p.rh = h;
    p.rw = w;
    p.take = p.from;
    return p;
  }
  DT_CHECK(resize >= std::max(oh, ow), "eval resize ", resize, " is smaller than the ", oh, "x", ow, " input");
  resized_dims(h, w, resize, &p.rh, &p.rw);
  p.take = Rect{half_round_even(p.rh - oh), half_round_even(p.rw - ow), oh, ow};
  return p;
}

SamplePlan train_plan(const AugmentOptions& aug, uint64_t seed, int64_t epoch, int64_t index, int64_t h,
                      int64_t w, int64_t oh, int64_t ow, int64_t resize) {
  const uint64_t r = sample_hash(seed, epoch, index);
  SampleRng rng(r ^ 0x5851'F42D'4C95'7F2Dull);
  SamplePlan p;
  switch (aug.mode) {
    case CropMode::none:
      p = eval_plan(h, w, oh, ow, resize);
      break;
    case CropMode::crop:
      DT_CHECK(resize >= std::max(oh, ow), "crop resize ", resize, " is smaller than the ", oh, "x", ow, " input");
      p.from = Rect{0, 0, h, w};
      resized_dims(h, w, resize, &p.rh, &p.rw);
      p.take = Rect{rng.below(p.rh - oh + 1), rng.below(p.rw - ow + 1), oh, ow};
      break;
    case CropMode::rrc:
      p.from = rrc_region(h, w, aug, rng);
      p.rh = oh;
      p.rw = ow;
      p.take = Rect{0, 0, oh, ow};
      break;
  }
  p.flip = aug.flip && ((r >> 40) & 1) != 0;  // the bit crop_flip_for uses
  return p;
}

CropFlip crop_flip_for(const AugmentOptions& aug, uint64_t seed, int64_t epoch, int64_t index) {
  CropFlip cf{aug.pad, aug.pad, false};
  if (!aug.enabled()) return cf;
  uint64_t r = sample_hash(seed, epoch, index);
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
