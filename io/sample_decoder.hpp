// io/sample_decoder.hpp — one stored sample → the network's input, on the
// calling thread: JPEG decode (TurboJPEG, DCT-scaled when the region is at
// least twice the size it is resized to), channel conversion, the sample's
// plan (io/augment.hpp: region → resize → window, libvips, io/resample.hpp),
// flip, normalisation to float CHW. A raw image of the input's size in
// training mode none takes the fused pad-crop/flip path of decode_sample
// (bitwise today's loader).
//
// Channels: a 3-channel image for a 1-channel input becomes luma — a JPEG's Y
// plane (TurboJPEG's gray decode), a raw image's (19595·R + 38470·G + 7471·B +
// 2^15) >> 16 (ITU-R 601 in libjpeg's and PIL's fixed point); a 1-channel image
// for a 3-channel input is replicated.
//
// DCT scaling changes the pixels a little (a reduced inverse DCT instead of a
// full decode and a triangle filter; the region rounded to whole pixels of the
// scaled image), so it is an option (InputTransform::dct_scaling, --dct-scaling).
//
// Randomness: the plan is a pure function of (seed, epoch, index) and the
// stored shape; the decoder holds only scratch buffers, so a batch is the same
// whatever thread decodes which sample.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/augment.hpp"
#include "io/dataset.hpp"
#include "io/jpeg_codec.hpp"

namespace dtrain::io {

struct InputTransform {
  ImageShape input;        // the network input of one sample (h, w, c)
  int64_t resize = 0;      // R of the fixed crops (eval, crop); 0 → default_resize(input)
  AugmentOptions augment;  // training augmentation; not used when !train
  bool train = true;       // false: the evaluation plan (no randomness, no flip)
  bool dct_scaling = true;
  // Raw images of another size than the input: resized + center-cropped when
  // set, else refused by check_transform for the evaluation and mode none (a
  // fixed-size file of the wrong size is most often the wrong file).
  bool fit_raw = false;
  int64_t resize_or_default() const { return resize > 0 ? resize : default_resize(input.h, input.w); }
};

// Checks that `t` can be applied to the images of `data`; throws UsageError
// naming the option (--augment-pad, --eval-resize, channels) when not.
void check_transform(const Dataset& data, const InputTransform& t);

// The largest d ∈ {8, 4, 2} with the plan's region at 1/d still at least the
// size it is resized to, else 1.
int dct_denominator(const SamplePlan& p);
// The plan for the h × w image decoded at 1/d (⌈h/d⌉ × ⌈w/d⌉): the region
// divided by d and rounded to whole pixels (the whole image stays whole).
SamplePlan scale_plan(const SamplePlan& p, int d, int64_t h, int64_t w);

// src: [h, w, cin] → dst: [h, w, cout] (file comment). Throws Error unless
// (cin, cout) is (3, 1) or (1, 3).
void convert_channels(const uint8_t* src, int64_t h, int64_t w, int64_t cin, int64_t cout, uint8_t* dst);

class SampleDecoder {
 public:
  // `data`, `t` and `norm` must outlive the decoder.
  SampleDecoder(const Dataset& data, const InputTransform& t, const NormalizeTable& norm, uint64_t seed);

  // The plan of sample `index` in `epoch` (train or evaluation, as t says).
  SamplePlan plan(int64_t index, int64_t epoch) const;
  // bytes: the stored bytes of sample `index` (Dataset::read_stored) →
  // out: [C, H, W] float of t.input. Throws Error naming the file and sample
  // on a damaged JPEG or one whose size differs from /shapes.
  void decode(int64_t index, int64_t epoch, const uint8_t* bytes, size_t size, float* out);

 private:
  const Dataset& data_;
  const InputTransform& t_;
  const NormalizeTable& norm_;
  uint64_t seed_;
  int64_t resize_;
  JpegDecoder jpeg_;
  std::vector<uint8_t> pixels_, window_;  // scratch
};

// The evaluator's and the tuner's batch: reads samples `indices` (any order)
// in one read_stored and decodes them with `threads` threads (≥ 1) into
// out: [B, C, H, W] float of t.input.
void load_batch(const Dataset& data, const std::vector<int64_t>& indices, const InputTransform& t,
                const NormalizeTable& norm, uint64_t seed, int64_t epoch, int threads, float* out);

}  // namespace dtrain::io
