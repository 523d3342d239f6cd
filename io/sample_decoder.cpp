// io/sample_decoder.cpp — SampleDecoder and load_batch (sample_decoder.hpp).
#include "io/sample_decoder.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <thread>

#include "core/error.hpp"
#include "io/resample.hpp"

namespace dtrain::io {

namespace {
bool convertible(int64_t cin, int64_t cout) { return cin == cout || (cin == 3 && cout == 1) || (cin == 1 && cout == 3); }

std::string shape_text(const ImageShape& s) { return detail::concat(s.h, "x", s.w, "x", s.c); }
}  // namespace

void check_transform(const Dataset& data, const InputTransform& t) {
  const ImageShape& in = t.input;
  DT_CHECK(in.h >= 1 && in.w >= 1 && in.c >= 1, "input shape ", shape_text(in));
  if (!convertible(data.channels(), in.c))
    DT_USAGE(data.path(), ": images have ", data.channels(), " channels but the model expects ", in.c,
             " (the loader converts 3 → 1 and 1 → 3 only)");
  const auto fixed = data.fixed_shape();
  const bool same = fixed && fixed->h == in.h && fixed->w == in.w;
  const AugmentOptions& a = t.augment;
  if (t.train && a.pad > 0 && (a.mode != CropMode::none || !same || fixed->c != in.c))
    DT_USAGE(data.path(), ": padded crops (augment-pad ", a.pad, ") need augment none and raw images of the model's size ",
             shape_text(in), "; found ", fixed ? shape_text(*fixed) + " raw images" : std::string("jpeg images"),
             a.mode != CropMode::none ? detail::concat(" and augment ", crop_mode_name(a.mode)) : std::string());
  const bool whole = !t.train || a.mode == CropMode::none;  // the evaluation plan
  if (whole && fixed && !same && !t.fit_raw)
    DT_USAGE(data.path(), ": images are ", fixed->h, "×", fixed->w, "×", fixed->c, " (H×W×C) but the model expects ",
             in.h, "×", in.w, "×", in.c, "; augment crop or rrc (or an explicit eval-resize) resizes and crops them");
  const bool fixed_crop = (t.train && a.mode == CropMode::crop) || (whole && !same);
  if (fixed_crop && t.resize_or_default() < std::max(in.h, in.w))
    DT_USAGE(data.path(), ": eval-resize ", t.resize_or_default(), " is smaller than the model's input ", in.h, "x",
             in.w, " (the shorter side is resized to it before the ", in.h, "x", in.w, " crop)");
  if (t.train && a.mode == CropMode::rrc) {
    DT_CHECK(a.scale_min > 0 && a.scale_min <= a.scale_max && a.scale_max <= 1, "rrc scale [", a.scale_min, ", ",
             a.scale_max, "]");
    DT_CHECK(a.ratio_min > 0 && a.ratio_min <= a.ratio_max, "rrc ratio [", a.ratio_min, ", ", a.ratio_max, "]");
  }
}

int dct_denominator(const SamplePlan& p) {
  for (int d : {8, 4, 2})
    if (p.from.h >= d * p.rh && p.from.w >= d * p.rw) return d;
  return 1;
}

SamplePlan scale_plan(const SamplePlan& p, int d, int64_t h, int64_t w) {
  if (d == 1) return p;
  const int64_t hs = jpeg_scaled(h, d), ws = jpeg_scaled(w, d);
  SamplePlan q = p;
  if (p.from == Rect{0, 0, h, w}) {
    q.from = Rect{0, 0, hs, ws};
    return q;
  }
  auto edge = [d](int64_t v, int64_t limit) {
    return std::clamp<int64_t>(int64_t(std::nearbyint(double(v) / double(d))), 0, limit);
  };
  const int64_t y0 = std::min(edge(p.from.y, hs), hs - 1), x0 = std::min(edge(p.from.x, ws), ws - 1);
  const int64_t y1 = std::max(edge(p.from.y + p.from.h, hs), y0 + 1);
  const int64_t x1 = std::max(edge(p.from.x + p.from.w, ws), x0 + 1);
  q.from = Rect{y0, x0, y1 - y0, x1 - x0};
  return q;
}

void convert_channels(const uint8_t* src, int64_t h, int64_t w, int64_t cin, int64_t cout, uint8_t* dst) {
  const int64_t n = h * w;
  if (cin == 3 && cout == 1) {
    for (int64_t i = 0; i < n; ++i, src += 3)
      dst[i] = uint8_t((19595u * src[0] + 38470u * src[1] + 7471u * src[2] + 0x8000u) >> 16);
  } else if (cin == 1 && cout == 3) {
    for (int64_t i = 0; i < n; ++i) dst[3 * i] = dst[3 * i + 1] = dst[3 * i + 2] = src[i];
  } else {
    DT_FAIL("convert_channels: ", cin, " → ", cout, " channels");
  }
}

SampleDecoder::SampleDecoder(const Dataset& data, const InputTransform& t, const NormalizeTable& norm,
                             uint64_t seed)
    : data_(data), t_(t), norm_(norm), seed_(seed), resize_(t.resize_or_default()) {
  window_.resize(size_t(t.input.h * t.input.w * t.input.c));
}

SamplePlan SampleDecoder::plan(int64_t index, int64_t epoch) const {
  const ImageShape s = data_.shape(index);
  if (!t_.train) return eval_plan(s.h, s.w, t_.input.h, t_.input.w, resize_);
  return train_plan(t_.augment, seed_, epoch, index, s.h, s.w, t_.input.h, t_.input.w, resize_);
}

void SampleDecoder::decode(int64_t index, int64_t epoch, const uint8_t* bytes, size_t size, float* out) {
  const ImageShape s = data_.shape(index);
  const int64_t oh = t_.input.h, ow = t_.input.w, oc = t_.input.c;
  if (data_.layout() == Layout::raw) {
    DT_CHECK(size == size_t(s.h * s.w * s.c), data_.path(), ": sample ", index, ": ", size, " stored bytes");
    const bool mode_none = !t_.train || t_.augment.mode == CropMode::none;
    if (mode_none && s.h == oh && s.w == ow && s.c == oc) {  // today's fused path
      const int pad = t_.train ? t_.augment.pad : 0;
      const CropFlip cf = t_.train ? crop_flip_for(t_.augment, seed_, epoch, index) : CropFlip{};
      decode_sample(bytes, oh, ow, oc, norm_, pad, cf, out);
      return;
    }
  }
  SamplePlan p = plan(index, epoch);
  const uint8_t* pix = bytes;
  int64_t ph = s.h, pw = s.w;
  if (data_.layout() == Layout::jpeg) {
    const int d = t_.dct_scaling ? dct_denominator(p) : 1;
    const std::string what = detail::concat(data_.path(), ": /jpeg: image ", index);
    jpeg_.decode(bytes, size, int(oc == 1 ? 1 : 3), d, pixels_, &ph, &pw, what, s.h, s.w);
    p = scale_plan(p, d, s.h, s.w);
    pix = pixels_.data();
  } else if (s.c != oc) {
    pixels_.resize(size_t(s.h * s.w * oc));
    convert_channels(bytes, s.h, s.w, s.c, oc, pixels_.data());
    pix = pixels_.data();
  }
  resample(pix, ph, pw, oc, p.from, p.rh, p.rw, p.take, window_.data());
  decode_sample(window_.data(), oh, ow, oc, norm_, 0, CropFlip{0, 0, p.flip}, out);
}

void load_batch(const Dataset& data, const std::vector<int64_t>& indices, const InputTransform& t,
                const NormalizeTable& norm, uint64_t seed, int64_t epoch, int threads, float* out) {
  if (indices.empty()) return;
  std::vector<int64_t> sorted(indices);
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  StoredSamples stored;
  data.read_stored(sorted, stored);
  const int64_t b = int64_t(indices.size()), chw = t.input.c * t.input.h * t.input.w;
  auto run = [&](int64_t begin, int64_t end) {
    SampleDecoder dec(data, t, norm, seed);
    for (int64_t k = begin; k < end; ++k) {
      const size_t pos = size_t(std::lower_bound(sorted.begin(), sorted.end(), indices[size_t(k)]) - sorted.begin());
      dec.decode(indices[size_t(k)], epoch, stored.data(pos), stored.size(pos), out + k * chw);
    }
  };
  const int64_t nt = std::clamp<int64_t>(threads, 1, b);
  if (nt == 1) {
    run(0, b);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<size_t>(nt));
  std::vector<std::thread> pool;
  const int64_t per = (b + nt - 1) / nt;
  for (int64_t i = 0; i < nt; ++i)
    pool.emplace_back([&, i] {
      try {
        run(i * per, std::min(b, (i + 1) * per));
      } catch (...) {
        errors[size_t(i)] = std::current_exception();
      }
    });
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace dtrain::io
