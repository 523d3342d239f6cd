// io/resample.hpp — the loader's resampler: one call resizes a region of an
// image and keeps a window of the result (libvips 8.14, no hand-written filter).
//
// Filter: libvips' "linear" kernel, per axis —
//   downsizing: vips_reduceh / vips_reducev with gap 0: a triangle filter whose
//     support grows with the shrink factor (antialiased), centre convention —
//     PIL's BILINEAR resize (which torchvision's Resize and RandomResizedCrop
//     call); interior pixels agree with PIL's, edge pixels differ slightly
//     (libvips replicates the edge, PIL renormalises the weights);
//   upsizing: vips_affine with the bilinear interpolator, centre convention
//     (input displacement 0.5, output displacement −0.5: output pixel X samples
//     input (X + ½)·in/out − ½), edges replicated — PIL's bilinear upsizing.
// vips_resize itself is not used: its upsizing samples X·in/out − ½, half an
// output pixel off the centre convention.
//
// Evaluation is pulled through a VipsRegion in the calling thread (no libvips
// worker threads), so loader threads call this concurrently. libvips'
// operation cache is turned off at the first call (cached results would keep
// pointers into reused buffers).
#pragma once

#include <cstdint>

namespace dtrain::io {

struct Rect {
  int64_t y = 0, x = 0, h = 0, w = 0;  // top, left, height, width (pixels)
  bool operator==(const Rect&) const = default;
};

// src: [h, w, c] uint8. The region `from` of src is resized to rh × rw, and the
// window `take` of that resized region goes to out: [take.h, take.w, c] uint8.
// Copies when no resize is needed. Throws Error on a region outside its image
// or a libvips failure (with libvips' message).
void resample(const uint8_t* src, int64_t h, int64_t w, int64_t c, const Rect& from, int64_t rh,
              int64_t rw, const Rect& take, uint8_t* out);

// The whole of src resized to oh × ow (resample with from = src, take = all).
void resize_image(const uint8_t* src, int64_t h, int64_t w, int64_t c, int64_t oh, int64_t ow,
                  uint8_t* out);

}  // namespace dtrain::io
