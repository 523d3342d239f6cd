// io/resample.hpp — the loader's resampler: one call resizes a region of an
// image and keeps a window of the result. Maintained libraries only, no
// hand-written filter: FFmpeg's libswscale (5.1) for 1- and 3-channel images
// whose region and resized size are at least kMinSwscaleSide in both
// dimensions (every crop of the recipes), libvips (8.14) otherwise.
//
// The filter, in both: bilinear, antialiased —
//   downsizing: a triangle filter whose support grows with the shrink factor,
//     centre convention — PIL's BILINEAR resize (which torchvision's Resize and
//     RandomResizedCrop call); interior pixels agree with PIL's, edge pixels
//     differ slightly (both libraries replicate the edge, PIL renormalises);
//   upsizing: bilinear interpolation, centre convention (output pixel X samples
//     input (X + ½)·in/out − ½), edges replicated — PIL's bilinear upsizing.
// libswscale: SWS_BILINEAR | SWS_ACCURATE_RND | SWS_BITEXACT (the same bytes on
// every CPU), one GRAY8 scaler applied to each colour plane (its planar RGB
// formats go through an internal YUV: not used), 14-bit fixed-point weights:
// within 1 grey level of exact bilinear, of libvips within 2 (tests).
// It is ~6× faster than libvips here (0.3 vs 1.9 ms CPU for a random-resized
// crop of a 256 × 341 image to 224 × 224; bench/README.md), but degrades on
// sizes below a few pixels — hence libvips for those.
// libvips: vips_reduceh / vips_reducev with the linear kernel and gap 0 for
// downsizing, vips_affine with the bilinear interpolator, input displacement
// 0.5 and output displacement −0.5 for upsizing (vips_resize is not used: its
// upsizing samples X·in/out − ½, half an output pixel off the centre
// convention); evaluation pulled through a VipsRegion in the calling thread (no
// libvips worker threads); its operation cache is turned off at the first call
// (cached results would keep pointers into reused buffers).
//
// Threads: each thread keeps its own swscale context and buffers
// (thread_local), so loader threads call this concurrently.
#pragma once

#include <cstdint>

namespace dtrain::io {

inline constexpr int64_t kMinSwscaleSide = 8;  // smaller regions or outputs go to libvips

struct Rect {
  int64_t y = 0, x = 0, h = 0, w = 0;  // top, left, height, width (pixels)
  bool operator==(const Rect&) const = default;
};

// Which library resample() uses: automatic (file comment); the others force
// one (tests compare them; swscale needs c ∈ {1, 3} and sizes ≥ kMinSwscaleSide).
enum class Resampler { automatic, swscale, vips };

// src: [h, w, c] uint8. The region `from` of src is resized to rh × rw, and the
// window `take` of that resized region goes to out: [take.h, take.w, c] uint8.
// Copies when no resize is needed. Throws Error on a region outside its image
// or a library failure (with its message).
void resample(const uint8_t* src, int64_t h, int64_t w, int64_t c, const Rect& from, int64_t rh,
              int64_t rw, const Rect& take, uint8_t* out, Resampler lib = Resampler::automatic);

// The whole of src resized to oh × ow (resample with from = src, take = all).
// Also the tests' and the fixtures' resize.
void resize_image(const uint8_t* src, int64_t h, int64_t w, int64_t c, int64_t oh, int64_t ow,
                  uint8_t* out);

}  // namespace dtrain::io
